/**
 * One write per master per tick: the
 * script calls that many acquires and releases issue in the same tick leave for each master in
 * (at most) two socket writes, and a lone call is not held back.
 */
import type { Redis } from 'ioredis';
import type { Socket } from 'node:net';
import { Redlock } from '../../lib/core/redlock';
import { evalScript } from '../../lib/core/redis/scripts/lua';
import { connectionOf } from '../../lib/core/redis/connection/adapt';
import { ACQUIRE_SCRIPT } from '../../lib/core/redis/kinds/mutex';
import { RELEASE_SCRIPT } from '../../lib/core/redis/scripts/release';
import { useMasters } from '../harness/engines';
import { uniqueResource } from '../harness/util';

const suite = useMasters(3, { requestTimeout: 1000, retryCount: 0 });
const engine = (): Redlock => suite.engine();

/** Counts the socket writes (write or writev calls reaching the socket) of a client. */
function countWrites(client: Redis): { readonly count: number; stop(): void } {
  const socket = client.stream as Socket & {
    _write: (...a: unknown[]) => void;
    _writev?: (...a: unknown[]) => void;
  };
  const write = socket._write;
  const writev = socket._writev;
  const counter = { count: 0, stop: () => undefined as void };
  socket._write = function (this: unknown, ...a: unknown[]) {
    counter.count++;
    return write.apply(this, a);
  };
  if (writev) {
    socket._writev = function (this: unknown, ...a: unknown[]) {
      counter.count++;
      return writev.apply(this, a);
    };
  }
  counter.stop = () => {
    socket._write = write;
    if (writev) socket._writev = writev;
  };
  return counter;
}

/** Loads the acquire and release scripts on every master. */
async function loadScripts(): Promise<void> {
  for (const c of suite.clients) {
    for (const s of [ACQUIRE_SCRIPT, RELEASE_SCRIPT]) await c.script('LOAD', s.source);
  }
}

it('sends the acquires and the releases of one tick to each master in one write', async () => {
  const rl = engine();
  // Warm up: nothing pending, and the scripts loaded on every master (the warm-up's acquire is
  // decided by two masters; the third may answer NOSCRIPT after that, and then does not run it).
  await (await rl.acquire(uniqueResource('warm'))).release();
  await loadScripts();
  const counters = suite.clients.map(countWrites);
  try {
    const resources = Array.from({ length: 20 }, (_, i) => uniqueResource(`tick${i}`));
    const locks = await Promise.all(resources.map((r) => rl.acquire(r, { ttl: 10_000 })));
    const afterAcquire = counters.map((c) => c.count);
    await Promise.all(locks.map((l) => l.release()));
    const afterRelease = counters.map((c, i) => c.count - afterAcquire[i]);
    // 20 acquires and 20 releases per master: without coalescing, 20 writes each. With it, the
    // first call of a tick is written at once and the rest of the tick in one writev; allow for
    // the socket still flushing the first one, and for replies read in more than one chunk on a
    // loaded machine (each chunk's continuations are one more tick): 8, far below 20.
    for (const n of afterAcquire) expect(n).toBeLessThanOrEqual(8);
    for (const n of afterRelease) expect(n).toBeLessThanOrEqual(8);
    for (const n of afterAcquire) expect(n).toBeGreaterThanOrEqual(1);
  } finally {
    for (const c of counters) c.stop();
  }
});

it('sends the NOSCRIPT fallbacks of one tick in one write as well', async () => {
  const rl = engine();
  await (await rl.acquire(uniqueResource('warm'))).release();
  await loadScripts();
  await suite.clients[0].script('FLUSH'); // master 0 restarted, say
  const counters = suite.clients.map(countWrites);
  try {
    const resources = Array.from({ length: 20 }, (_, i) => uniqueResource(`noscript${i}`));
    const locks = await Promise.all(resources.map((r) => rl.acquire(r, { ttl: 10_000 })));
    const writes = counters[0].count;
    await Promise.all(locks.map((l) => l.release()));
    // 20 EVALSHA (answered NOSCRIPT), then 20 EVAL: two ticks of two writes at most each — more
    // ticks when the NOSCRIPT replies are read in more than one chunk on a loaded machine (CI
    // once counted 5). Sent one by one, the EVALs made 20 writes of their own: 8 is far below.
    expect(writes).toBeLessThanOrEqual(8);
  } finally {
    for (const c of counters) c.stop();
  }
});

it('loads a script whose NOSCRIPT fallback is not sent any more', async () => {
  const client = suite.clients[1];
  await client.script('FLUSH');
  const key = `coalesce:${uniqueResource('unwanted')}`;
  const call = evalScript(connectionOf(client), RELEASE_SCRIPT, [key], ['token', '0'], () => false);
  await expect(call).rejects.toThrow(/NOSCRIPT/);
  // The next call finds the script: no second NOSCRIPT round-trip. Nothing was run.
  expect(await client.script('EXISTS', RELEASE_SCRIPT.sha)).toEqual([1]);
  expect(await client.exists(key)).toBe(0);
  await loadScripts();
});

it('still answers a lone call at once, and leaves the socket uncorked after the tick', async () => {
  const rl = engine();
  const lock = await rl.acquire(uniqueResource('lone'));
  expect(lock.votes.filter((v) => v.outcome === 'ok').length).toBeGreaterThanOrEqual(2);
  await new Promise((r) => process.nextTick(r));
  for (const c of suite.clients) expect((c.stream as Socket).writableCorked).toBe(0);
  await lock.release();
  await new Promise((r) => process.nextTick(r));
  for (const c of suite.clients) expect((c.stream as Socket).writableCorked).toBe(0);
});
