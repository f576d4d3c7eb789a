/**
 * A Redis URL in `forRoot({ clients })` / `forRootAsync` whose user info holds an unencoded `#`,
 * `/` or `?` (lib/clients.ts `urlUserInfoProblem`): a URL parser ends the user info there, so
 * the URL does not say what its author meant (another host, port or path, the rest a fragment or
 * a query). Startup fails with an `InvalidConfigurationError` naming the client by its position
 * and the character, never the password; the same password percent-encoded boots and locks on a
 * real master whose ACL user has exactly that password.
 */
import 'reflect-metadata';
import type { INestApplicationContext, LoggerService } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { InvalidConfigurationError, RedlockModule, RedlockService } from '../../lib';
import type { RedlockModuleOptions } from '../../lib';
import { RedisMasters } from '../harness/redis-masters';
import { uniqueResource } from '../harness/util';

class RecordingLogger implements LoggerService {
  readonly lines: string[] = [];
  log(m: unknown, ...rest: unknown[]): void {
    this.lines.push([m, ...rest].map(String).join(' '));
  }
  error(m: unknown, ...rest: unknown[]): void {
    this.log(m, ...rest);
  }
  warn(m: unknown, ...rest: unknown[]): void {
    this.log(m, ...rest);
  }
}

const opened: INestApplicationContext[] = [];
let masters: RedisMasters;
let port: number;

/** Passwords a user may paste as they are; each piece (`SEC`, `RETPW`...) must never show. */
const PASSWORDS: readonly [string, string][] = [
  ['#', 'SEC#RETPW'],
  ['/', 'SEC/RETPW'],
  ['?', 'SEC?RETPW'],
  ['#', '4711#RETPW'], // reads as a valid URL: host "user", port 4711
  ['/', 'SEC:ON/D#RETPW'],
];
const PIECES = ['SEC', 'RETPW', '4711', 'ON/D'];

async function boot(
  options: () => RedlockModuleOptions,
  async: boolean,
  logger: RecordingLogger,
): Promise<INestApplicationContext> {
  const imports = [
    async ? RedlockModule.forRootAsync({ useFactory: options }) : RedlockModule.forRoot(options()),
  ];
  const builder = Test.createTestingModule({ imports });
  builder.setLogger(logger);
  const moduleRef = await builder.compile();
  await moduleRef.init();
  opened.push(moduleRef);
  return moduleRef;
}

beforeAll(async () => {
  masters = await RedisMasters.start(1);
  port = masters.masters[0].port;
  const [admin] = masters.createClients();
  await RedisMasters.ready([admin]);
  await admin.call(
    'ACL',
    'SETUSER',
    'user',
    'on',
    ...PASSWORDS.map(([, pw]) => `>${pw}`),
    '~*',
    '&*',
    '+@all',
  );
  await admin.quit();
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((m) => m.close()));
});

afterAll(() => masters.stop());

describe.each([
  ['forRoot', false],
  ['forRootAsync', true],
])('%s', (_label, async) => {
  it.each(PASSWORDS)(
    'an unencoded %j in the password fails startup naming the client, never the password',
    async (char, password) => {
      const logger = new RecordingLogger();
      const url = `redis://user:${password}@127.0.0.1:${port}`;
      const err = await boot(
        () => ({ clients: [`redis://127.0.0.1:${port}`, url], quarantine: false }),
        async,
        logger,
      ).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidConfigurationError);
      const e = err as InvalidConfigurationError;
      expect(e.field).toBe('clients[1]');
      expect(e.message).toContain('"clients[1]"');
      expect(e.message).toContain(`"${char}"`);
      expect(e.message).toMatch(/percent-encode/i);
      const shown = [e.message, String(e.stack), JSON.stringify(e), ...logger.lines].join('\n');
      for (const piece of PIECES) expect(shown).not.toContain(piece);
    },
  );

  it.each(PASSWORDS)(
    'the same password percent-encoded (%j) boots and locks',
    async (_char, password) => {
      const url = `redis://user:${encodeURIComponent(password)}@127.0.0.1:${port}`;
      const ctx = await boot(
        () => ({ clients: [url], quarantine: false, requestTimeout: 500 }),
        async,
        new RecordingLogger(),
      );
      const svc = ctx.get(RedlockService);
      const lock = await svc.acquire(uniqueResource('encoded'));
      await svc.release(lock);
    },
  );
});
