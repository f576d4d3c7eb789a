/**
 * The @nestjs/terminus health indicator: per-master reachability, latency and quarantine, and
 * quorum availability (REDLOCK.md, "Properties we promise": liveness B needs a majority up).
 */
import 'reflect-metadata';
import { TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import type { TestingModule } from '@nestjs/testing';
import { RedlockModule } from '../../lib/redlock.module';
import { RedlockHealthIndicator } from '../../lib/health/redlock.health';
import { RedisMasters } from '../harness/redis-masters';

const SECRET = 'hunter2-secret';
let masters: RedisMasters;
let app: TestingModule;

beforeAll(async () => {
  masters = await RedisMasters.start(5, { extraArgs: ['--requirepass', SECRET] });
  app = await Test.createTestingModule({
    imports: [
      TerminusModule,
      RedlockModule.forRoot({
        clients: masters.masters.map((m) => `redis://:${SECRET}@127.0.0.1:${m.port}`),
        quarantine: { duration: 1500 },
        requestTimeout: 200,
      }),
    ],
    providers: [RedlockHealthIndicator],
  }).compile();
  app.useLogger(false);
  await app.init();
});

afterAll(async () => {
  await app.close();
  await masters.stop();
});

it('reports quarantine of fresh masters, then up with every master reachable', async () => {
  const indicator = app.get(RedlockHealthIndicator);
  const early = await indicator.isHealthy('locks');
  // Freshly started masters could have lost locks a moment ago: quarantined, so down.
  expect(early.locks.status).toBe('down');
  expect(early.locks.masters.every((m: { quarantined: boolean }) => m.quarantined)).toBe(true);
  // ...and for how much longer at most.
  for (const m of early.locks.masters as { quarantineRemaining?: number }[]) {
    expect(m.quarantineRemaining).toBeGreaterThan(0);
    expect(m.quarantineRemaining).toBeLessThanOrEqual(1500);
  }

  await new Promise((r) => setTimeout(r, 1600));
  const result = await indicator.isHealthy('locks');
  expect(result.locks.status).toBe('up');
  expect(result.locks.usable).toBe(5);
  expect(result.locks.masters).toHaveLength(5);
  for (const m of result.locks.masters as { reachable: boolean; latency: number; name: string }[]) {
    expect(m.reachable).toBe(true);
    expect(m.latency).toBeGreaterThanOrEqual(0);
    expect(m).not.toHaveProperty('quarantineRemaining');
  }
  expect(JSON.stringify(result)).not.toContain(SECRET);
});

it('is down without a quorum, naming the unreachable masters without secrets', async () => {
  await Promise.all([0, 1, 2].map((i) => masters.masters[i].kill()));
  const result = await app.get(RedlockHealthIndicator).isHealthy();
  expect(result.redlock.status).toBe('down');
  expect(result.redlock.usable).toBe(2);
  const unreachable = (result.redlock.masters as { reachable: boolean; error?: string }[]).filter(
    (m) => !m.reachable,
  );
  expect(unreachable).toHaveLength(3);
  expect(JSON.stringify(result)).not.toContain(SECRET);
});
