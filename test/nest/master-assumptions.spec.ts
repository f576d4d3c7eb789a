/**
 * The masters' assumptions at the Nest module's startup (issue 53, item 4), against real
 * servers: a replica of another listed master fails the boot with an InvalidConfigurationError
 * naming both positions (not independent); a master that answers but cannot vote — here a replica
 * of an unlisted master — boots, and is reported through the Nest logger and by the terminus
 * indicator as unusable with its cause.
 */
import 'reflect-metadata';
import { TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import type { LoggerService } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import { InvalidConfigurationError, RedlockModule } from '../../lib';
import type { RedlockModuleOptions } from '../../lib';
import { RedlockHealthIndicator } from '../../lib/health/redlock.health';
import { RedisMaster, freePort } from '../harness/redis-masters';
import { SUITE_DEFAULTS, useMasters } from '../harness/engines';
import { waitUntil } from '../harness/util';

const suite = useMasters(3);
let replica: RedisMaster;

beforeAll(async () => {
  // A replica of masters[0].
  replica = new RedisMaster(await freePort(), {
    extraArgs: ['--replicaof', '127.0.0.1', String(suite.masters.masters[0].port)],
  });
  await replica.start();
});

afterAll(async () => {
  await replica.kill();
  replica.cleanup();
});

/** Every message the application logged (each level), as text. */
function recordingLogger(): LoggerService & { messages: string[] } {
  const messages: string[] = [];
  const push = (m: unknown): void => void messages.push(String(m));
  return { messages, log: push, error: push, warn: push, debug: push, verbose: push };
}

/** Boots the module with `given` over the suites' settings; the module, or the error of its boot. */
async function boot(
  given: RedlockModuleOptions,
  logger: LoggerService | false = false,
): Promise<TestingModule | { error: unknown }> {
  const moduleRef = await Test.createTestingModule({
    imports: [TerminusModule, RedlockModule.forRoot({ ...SUITE_DEFAULTS, ...given })],
    providers: [RedlockHealthIndicator],
  }).compile();
  moduleRef.useLogger(logger);
  try {
    await moduleRef.init();
  } catch (error) {
    return { error };
  }
  return moduleRef;
}

it('a replica of another listed master: the boot fails, naming both positions', async () => {
  const [a, b] = suite.masters.urls;
  const booted = await boot({ clients: [a, b, `redis://127.0.0.1:${replica.port}`] });
  if (!('error' in booted)) await booted.close();
  const { error } = booted as { error: unknown };
  expect(error).toBeInstanceOf(InvalidConfigurationError);
  expect((error as Error).message).toMatch(
    /clients\[2\] \(redis:\/\/127\.0\.0\.1:\d+\) is a replica of clients\[0\] \(redis:\/\/127\.0\.0\.1:\d+\).*not independent/,
  );
});

it('a replica of an unlisted master: boots, logged and reported unusable with its cause', async () => {
  const [, b, c] = suite.masters.urls;
  const logger = recordingLogger();
  const booted = await boot({ clients: [b, c, `redis://127.0.0.1:${replica.port}`] }, logger);
  if ('error' in booted) throw booted.error;
  try {
    await waitUntil(() => logger.messages.some((m) => /clients\[2\].*cannot vote/.test(m)));
    const said = logger.messages.find((m) => /cannot vote/.test(m)) ?? '';
    expect(said).toMatch(/read-only replica of 127\.0\.0\.1:\d+/);
    // (Read again while a PING misses the request timeout on a loaded machine.)
    const indicator = booted.get(RedlockHealthIndicator);
    let health = await indicator.isHealthy('locks');
    await waitUntil(async () => (health = await indicator.isHealthy('locks')).locks.usable === 2);
    expect(health.locks.status).toBe('up'); // two of three usable: a quorum
    expect(health.locks.usable).toBe(2);
    const masters = health.locks.masters as { unusable?: string }[];
    expect(masters[2].unusable).toMatch(/read-only replica/);
    expect(masters[0].unusable).toBeUndefined();
  } finally {
    await booted.close();
  }
});
