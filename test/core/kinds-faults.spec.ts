/**
 * Shared locks and semaphores under faults, against 5 real masters: a master killed, a master
 * restarted empty (restart quarantine), a holder process SIGSTOPped past its validity (its lock
 * expires, others get in, its signal aborts when it runs again).
 */
import { spawn } from 'node:child_process';
import type { Redis } from 'ioredis';
import { LockContendedError, LockLostError, NoQuorumError } from '../../lib/core/base/errors';
import { Redlock } from '../../lib/core/redlock';
import { repoPath } from '../harness/paths';
import { RedisMasters } from '../harness/redis-masters';
import { uniqueResource, waitUntil } from '../harness/util';

let masters: RedisMasters;
let probe: Redis[];
const engines: Redlock[] = [];

function engine(quarantine: boolean): Redlock {
  const rl = new Redlock(masters.createClients(), {
    quarantine: quarantine ? { duration: 3000 } : false,
    ttl: 2000,
    maxTtl: 2000,
    requestTimeout: 200,
    retryDelay: 20,
    retryJitter: 10,
  });
  engines.push(rl);
  return rl;
}

beforeAll(async () => {
  masters = await RedisMasters.start(5);
  probe = masters.createClients();
  await RedisMasters.ready(probe);
});

afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
  await masters.stop();
});

it('a master killed: semaphores of limit ≥ 2 still work with one master down, not two; shared locks with two', async () => {
  const rl = engine(false);
  const r = uniqueResource('killed');
  await masters.masters[4].kill();
  try {
    const a = await rl.acquire(r, { limit: 2 });
    const b = await rl.acquire(r, { limit: 2 });
    expect(await rl.tryAcquire(r, { limit: 2 })).toBeNull(); // still at most 2
    await Promise.all([a.release(), b.release()]);
    await masters.masters[3].kill();
    const err = await rl.acquire(r, { limit: 2, retryCount: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoQuorumError);
    expect((err as NoQuorumError).quorum).toBe(4);
    const reader = await rl.acquire(uniqueResource('killed-shared'), { shared: true });
    expect(reader.votes.filter((v) => v.outcome === 'ok')).toHaveLength(3);
    await reader.release();
  } finally {
    await masters.masters[3].restart();
    await masters.masters[4].restart();
  }
});

it('a master restarted empty is quarantined: it cannot lend its vote to a writer against readers, nor to an extra semaphore holder', async () => {
  const rl = engine(true);
  // fresh processes: wait out their quarantine
  await waitUntil(async () => (await rl.health()).usable === 5, 10_000);
  const r = uniqueResource('restart');
  const s = uniqueResource('restart-sem');
  const reader = await rl.acquire(r, { shared: true });
  // The reader's membership never reached masters 3 and 4 (it holds on 0, 1, 2: a majority).
  // (First wait for the late answers of the acquire: it resolved with a quorum.)
  await waitUntil(async () =>
    (await Promise.all(probe.map((c) => c.zscore(rl.keyOf(r), reader.value)))).every(Boolean),
  );
  await Promise.all([3, 4].map((i) => probe[i].zrem(rl.keyOf(r), reader.value)));
  const [a, b] = [await rl.acquire(s, { limit: 2 }), await rl.acquire(s, { limit: 2 })];
  await masters.masters[2].restart(); // comes back empty: it would grant the writer
  await waitUntil(async () => (await rl.health()).masters[2].reachable, 5000);
  // Without quarantine masters 2, 3, 4 would make a majority for a writer next to the reader.
  const writer = await rl.acquire(r, { retryCount: 0 }).catch((e: unknown) => e);
  expect(writer).toBeInstanceOf(LockContendedError);
  const votes = (writer as LockContendedError).votes.map((v) => v.outcome);
  // Masters 3, 4 grant; only 0, 1, 2 can refuse, so the round always waits for master 2's vote.
  expect(votes[2]).toBe('quarantined');
  expect(votes.filter((v) => v === 'ok').length).toBeLessThan(3);
  expect(votes).not.toContain('error');
  const third = await rl.acquire(s, { limit: 2, retryCount: 0 }).catch((e: unknown) => e);
  expect(third).toBeInstanceOf(LockContendedError);
  expect((third as LockContendedError).votes[2].outcome).not.toBe('ok');
  // the reader is left on 2 masters: its extension finds it lost (never re-created on the
  // restarted master); the semaphore holders, on 4, keep extending
  await expect(reader.extend()).rejects.toBeInstanceOf(LockLostError);
  await a.extend();
  await Promise.all([reader.release(), a.release(), b.release()]);
});

function holder(resource: string, kind: string, ttl: number) {
  const ports = masters.masters.map((m) => m.port).join(',');
  const child = spawn(
    process.execPath,
    [
      '-r',
      'ts-node/register/transpile-only',
      repoPath('test', 'core', 'fixtures', 'kind-holder-worker.ts'),
      ports,
      resource,
      kind,
      String(ttl),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { child, output: () => out, exited };
}

for (const kind of ['shared', '1']) {
  it(`a SIGSTOPped ${kind === 'shared' ? 'reader' : 'semaphore holder'}: its lock expires, the resource is free for others, its signal aborts when it runs again`, async () => {
    const rl = engine(false);
    const r = uniqueResource('sigstop');
    const h = holder(r, kind, 600);
    try {
      await waitUntil(async () => h.output().includes('held '), 15_000);
      h.child.kill('SIGSTOP');
      // The stopped process cannot extend: after its ttl, a writer (or another holder) gets in.
      const other = await rl.acquire(r, {
        ...(kind === 'shared' ? {} : { limit: 1 }),
        retryCount: 10_000,
        waitTimeout: 5000,
      });
      h.child.kill('SIGCONT');
      await waitUntil(async () => h.output().includes('aborted'), 10_000);
      expect(h.output()).toContain('aborted LOCK_LOST');
      expect(await h.exited).toBe(0);
      await other.release();
    } finally {
      h.child.kill('SIGCONT');
      h.child.kill('SIGKILL');
    }
  });
}
