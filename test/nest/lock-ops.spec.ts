/**
 * inspect, lockAtLeastFor and portable locks through Nest: `@Locked({ onLocked: 'skip', lockAtLeastFor })` on a
 * cron-style provider method in two "replicas" (two applications over the same masters), and
 * `RedlockService.inspect` / `isLocked` / `restore`.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import { InvalidConfigurationError, InvalidLockDataError } from '../../lib/core/base/errors';
import { Locked } from '../../lib/decorators/locked.decorator';
import { RedlockModule } from '../../lib/redlock.module';
import { RedlockService } from '../../lib/redlock.service';
import { SUITE_DEFAULTS, useMasters } from '../harness/engines';
import { RedisMasters } from '../harness/redis-masters';
import { sleep, uniqueResource, waitUntil } from '../harness/util';

const runs: string[] = [];

@Injectable()
class ReportJob {
  /** Fast, like a job whose work is small: the lock outlives it by lockAtLeastFor. */
  @Locked('reports:{args.0}', { onLocked: 'skip', lockAtLeastFor: 1500 })
  async daily(id: string, replica: string): Promise<string> {
    runs.push(replica);
    return replica;
  }
}

@Module({ providers: [ReportJob] })
class JobsModule {}

const suite = useMasters(3);
const apps: INestApplication[] = [];
suite.closeFirst(() => Promise.all(apps.map((a) => a.close())));

async function replica(): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      RedlockModule.forRoot({
        clients: suite.masters.urls,
        ...SUITE_DEFAULTS,
        requestTimeout: 500,
        isGlobal: true,
      }),
      JobsModule,
    ],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: ['error'] });
  await app.init();
  await RedisMasters.ready(app.get(RedlockService).clients as Redis[]);
  apps.push(app);
  return app;
}

describe('@Locked lockAtLeastFor (cron job on two replicas)', () => {
  it('the replica whose timer fires later skips the job until lockAtLeastFor has passed', async () => {
    const [a, b] = [await replica(), await replica()];
    const id = uniqueResource('daily');
    const started = Date.now();
    expect(await a.get(ReportJob).daily(id, 'a')).toBe('a');
    // The job is over on a; b's timer fires a little later: skipped, the lock is kept.
    expect(await b.get(ReportJob).daily(id, 'b')).toBeUndefined();
    expect(await b.get(RedlockService).isLocked(`reports:${id}`)).toBe(true);
    let result: string | undefined;
    while (result === undefined) {
      expect(Date.now() - started).toBeLessThan(10_000);
      await sleep(25);
      result = await b.get(ReportJob).daily(id, 'b');
    }
    expect(Date.now() - started).toBeGreaterThanOrEqual(1490);
    expect(runs.filter((r) => r === 'a' || r === 'b')).toEqual(['a', 'b']);
  });

  it('is checked at decoration and in lockedDefaults (typed errors)', async () => {
    expect(() => Locked('x', { lockAtLeastFor: -1 })).not.toThrow(); // decorator factory
    expect(() => {
      class Bad {
        @Locked('x', { lockAtLeastFor: -1 })
        run(): void {}
      }
      return Bad;
    }).toThrow(InvalidConfigurationError);
    expect(() => {
      class Bad {
        @Locked('x', { lockAtLeastFor: 1.5 })
        run(): void {}
      }
      return Bad;
    }).toThrow(InvalidConfigurationError);
    await expect(
      Test.createTestingModule({
        imports: [
          RedlockModule.forRoot({
            clients: suite.masters.urls,
            maxTtl: 10_000,
            ttl: 5000,
            lockedDefaults: { lockAtLeastFor: 10_001 },
          }),
        ],
      }).compile(),
    ).rejects.toThrow(InvalidConfigurationError);
  });
});

describe('RedlockService inspect / isLocked / restore', () => {
  it('inspects, and takes over a lock serialized by another application', async () => {
    const [a, b] = [await replica(), await replica()];
    const sa = a.get(RedlockService);
    const sb = b.get(RedlockService);
    const r = uniqueResource('svc-portable');
    expect(await sb.inspect(r)).toEqual({ resource: r, locked: false, holders: 0, ttl: 0 });
    const lock = await sa.acquire(r, { ttl: 5000 });
    await waitUntil(async () => (await sb.inspect(r)).locked);
    const moved = sb.restore(JSON.parse(JSON.stringify(lock)));
    await sb.extend(moved, 8000);
    expect((await sb.inspect(r)).ttl).toBeGreaterThan(5000);
    await sb.release(moved);
    await waitUntil(async () => !(await sa.isLocked(r)));
    expect(() => sb.restore({ nope: true })).toThrow(InvalidLockDataError);
  });
});
