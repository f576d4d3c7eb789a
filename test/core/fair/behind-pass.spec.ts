/**
 * A pass that reaches a master before the pass it follows (redis/scripts/release.ts ARGV[14],
 * Grant.installedBy; lib/core/fair/README.md, "A pass read before the pass it follows"),
 * against a real redis-server master: engine X's lock was installed by engine F's pass on the
 * other masters; on this one, which was descheduled, F's pass is still on its way when X's own
 * pass arrives (two processes' connections: either may be read first). X's pass must name nobody
 * there — else it names the engine after the one it names on the other masters, and F's pass,
 * when it runs, the one after that: this master's order one engine ahead of the others' from then
 * on. F's pass then names here the engine that X's pass named elsewhere.
 */
import { describe, expect, it } from '@jest/globals';
import { lockKey } from '../../../lib/core/base/keys';
import { FAIR_MUTEX } from '../../../lib/core/fair/fair-mutex';
import { orderKey, parkKey } from '../../../lib/core/fair/fair-keys';
import type { YieldOrder } from '../../../lib/core/fair/fair-mutex';
import { newEngineId, newToken } from '../../../lib/core/base/token';
import { FAIR_DEFAULTS, useMasters } from '../../harness/engines';
import { RedisMasters } from '../../harness/redis-masters';
import { uniqueResource } from '../../harness/util';

const PREFIX = 'lock:';
const suite = useMasters(1, FAIR_DEFAULTS);

/** Runs the release script as the store builds it: a pass of `token`, `after` its installer. */
async function pass(r: string, key: string, token: string, after: string): Promise<unknown> {
  const order: YieldOrder = {
    keys: [orderKey(PREFIX, r)],
    reserveMs: 1000,
    since: undefined,
    keepMs: 61_000,
    install: {
      parkKey: parkKey(PREFIX, r),
      token: '',
      ttl: 0,
      life: 0,
      fenceKey: undefined,
      fenceTtl: 60_000,
      marker: undefined,
      alive: '',
      after,
    },
  };
  const call = FAIR_MUTEX.releaseAs(token, [key], 'pass', order);
  return suite.probe[0].eval(call.script.source, call.keys.length, ...call.keys, ...call.args);
}

describe('a pass that arrives before the pass it follows', () => {
  it('names nobody where the key still holds its installer; the installer then names the head', async () => {
    const [c] = suite.probe;
    const r = uniqueResource('behind');
    const key = lockKey(PREFIX, r);
    const [f, x, n, m] = [newEngineId(), newEngineId(), newEngineId(), newEngineId()];
    const fToken = newToken(f);
    const xToken = newToken(x);
    const nToken = newToken(n);
    // This master as F's pass left the others: F holds the key here; X (named by F's pass on
    // the others), then N, then M wait; N and M parked their next tokens here.
    await c.set(key, fToken, 'PX', 10_000);
    await c.zadd(orderKey(PREFIX, r), 1000, x, 2000, n, 3000, m);
    await c.pexpire(orderKey(PREFIX, r), 60_000);
    const until = Number((await c.time())[0]) * 1000 + 60_000;
    await c.hset(
      parkKey(PREFIX, r),
      n,
      `${nToken} 5000 ${until}`,
      m,
      `${newToken(m)} 5000 ${until}`,
    );
    await c.pexpire(parkKey(PREFIX, r), 60_000);
    const heard: string[] = [];
    const sub = suite.masters.createClients()[0];
    try {
      await RedisMasters.ready([sub]);
      await sub.subscribe(key);
      sub.on('message', (_ch: string, msg: string) => heard.push(msg));
      // X's pass first: it leaves the order, names nobody, announces nothing.
      expect(await pass(r, key, xToken, fToken)).toBe(0);
      expect(await c.zrange(orderKey(PREFIX, r), '0', '-1')).toStrictEqual([n, m]);
      expect(await c.hexists(parkKey(PREFIX, r), n)).toBe(1);
      expect(await c.get(key)).toBe(fToken);
      // F's pass, late: it names N (whom X's pass named on the other masters) and installs
      // N's parked token, as X's pass did there.
      expect(await pass(r, key, fToken, '')).toBe(1);
      expect(await c.get(key)).toBe(nToken);
      expect(await c.zrange(orderKey(PREFIX, r), '0', '-1')).toStrictEqual([m]);
      await sub.ping(); // (the message, published before, comes first on this connection)
      expect(heard).toHaveLength(1);
      expect(heard[0].split(':').slice(0, 3)).toStrictEqual([`^${fToken}`, n, nToken]);
    } finally {
      sub.disconnect();
    }
  });

  it('names the head as before where the key holds another token than its installer', async () => {
    const [c] = suite.probe;
    const r = uniqueResource('behind');
    const key = lockKey(PREFIX, r);
    const [f, g, x, n] = [newEngineId(), newEngineId(), newEngineId(), newEngineId()];
    const gToken = newToken(g); // say, a failed attempt's key, not the installer's
    await c.set(key, gToken, 'PX', 10_000);
    await c.zadd(orderKey(PREFIX, r), 1000, x, 2000, n);
    await c.pexpire(orderKey(PREFIX, r), 60_000);
    expect(await pass(r, key, newToken(x), newToken(f))).toBe(0);
    // "One order on every master": N, named on the others, is named (taken off) here too.
    expect(await c.zrange(orderKey(PREFIX, r), '0', '-1')).toStrictEqual([]);
    expect(await c.get(key)).toBe(gToken);
  });
});
