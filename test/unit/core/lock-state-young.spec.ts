/**
 * A lock's state keeps no closure made for it (lib/core/lock/lock.ts, `LockLossListener`): what a
 * lock tells when it ends or is lost goes to the engine's shared observers and local queue. A
 * closure per lock kept in the state made V8 allocate the states and their grants straight in
 * the old generation (allocation-site pretenuring), where each stayed, garbage, until a full
 * collection, keeping the young objects it pointed to alive through every scavenge: a quarter
 * more CPU per acquire + release (bench/engine-cost.ts). The child process (fixtures/young-locks.ts)
 * runs 30,000 locks with the young generation the bench's ts-node process has (16 MB) and asks
 * V8 where the newest lock's state and grant live.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from '@jest/globals';
import { InMemoryRedlock } from '../../../lib/testing/in-memory-redlock';
import { lockState } from '../../../lib/core/lock/lock';
import { repoPath } from '../../harness/paths';

describe("a lock's state", () => {
  it('tells its end and its loss to objects shared by every lock of the engine', async () => {
    const engine = new InMemoryRedlock({ logger: { warn: () => undefined } });
    try {
      const a = await engine.acquire('young-a');
      const b = await engine.acquire('young-b');
      const [sa, sb] = [lockState(a), lockState(b)];
      for (const s of [sa, sb]) {
        for (const value of Object.values(s)) expect(typeof value).not.toBe('function');
      }
      expect(sa.onLost).toBeDefined();
      expect(sa.onEnd).toBeDefined();
      expect(sa.onLost).toBe(sb.onLost);
      expect(sa.onEnd).toBe(sb.onEnd);
      await a.release();
      await b.release();
    } finally {
      await engine.close();
    }
  });

  it('is allocated in the young generation, as is its grant, after 30,000 locks', () => {
    const r = spawnSync(
      process.execPath,
      [
        '--allow-natives-syntax',
        '--min-semi-space-size=16',
        '--max-semi-space-size=16',
        '-r',
        'ts-node/register/transpile-only',
        repoPath('test', 'unit', 'core', 'fixtures', 'young-locks.ts'),
      ],
      { encoding: 'utf8', timeout: 120_000 },
    );
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout)).toStrictEqual({ state: true, grant: true });
  }, 150_000);
});
