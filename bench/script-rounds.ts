/**
 * Probe (not a side-by-side scenario): what the acquire script's parts cost a whole round on this
 * machine. One caller sends a round of one `EVALSHA` to each of 5 fresh masters, then a round of
 * `DEL`s of the key, for 1.5 s per variant, 4 interleaved passes; prints rounds per second (an
 * acquire round and its `DEL` round) and the Node CPU per pair.
 *
 *   npx ts-node --transpile-only bench/script-rounds.ts
 *
 * Variants: a bare `SET NX PX` script (the floor); ACQUIRE_SCRIPT as the engine sends a first
 * attempt (lock key, fencing counter, boot marker; the marker value known old); the same without
 * the marker check, without fencing; and with neither (one key).
 */
import type { Redis } from 'ioredis';
import { RedisMasters } from '../test/harness/redis-masters';
import { ACQUIRE_SCRIPT } from '../lib/core/redis/kinds/mutex';

const TOKEN = 'a2FlC_v81uk2vF_kkqEHe7soFlCQu48FbJahpL0';
const BIRTH = '1795788982922';

type Variant = [string, (c: Redis, i: number) => Promise<unknown>];

async function main(): Promise<void> {
  const masters = await RedisMasters.start(5);
  const clients = masters.createClients();
  try {
    await RedisMasters.ready(clients);
    const load = async (source: string): Promise<string> => {
      let sha = '';
      for (const c of clients) sha = String(await c.script('LOAD', source));
      return sha;
    };
    const setnx = await load(
      `return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0`,
    );
    const acq = await load(ACQUIRE_SCRIPT.source);
    for (const c of clients) await c.set('b:boot', BIRTH);
    const k = (i: number): string => `b:{r${i}}`;
    /** ACQUIRE_SCRIPT as a first attempt sends it, with `parts` left out where false. */
    const acquire = (
      c: Redis,
      i: number,
      parts: { marker: boolean; fencing: boolean },
    ): Promise<unknown> => {
      const keys = [k(i)];
      if (parts.fencing) keys.push(`b:fence:{f${i % 64}}`);
      if (parts.marker) keys.push('b:boot');
      const args = [TOKEN, '10000', parts.fencing ? '1' : '0', parts.marker ? BIRTH : '0'];
      args.push('1', '3600000');
      return c.evalsha(acq, keys.length, ...keys, ...args);
    };
    const all = { marker: true, fencing: true };
    const variants: Variant[] = [
      ['SET NX PX script', (c, i) => c.evalsha(setnx, 1, k(i), TOKEN, '10000')],
      ['acquire, all parts', (c, i) => acquire(c, i, all)],
      ['acquire, no marker', (c, i) => acquire(c, i, { ...all, marker: false })],
      ['acquire, no fencing', (c, i) => acquire(c, i, { ...all, fencing: false })],
      ['acquire, neither', (c, i) => acquire(c, i, { marker: false, fencing: false })],
    ];
    let seq = 0;
    for (let pass = 0; pass < 4; pass++) {
      for (const [name, call] of variants) {
        const t0 = performance.now();
        const cpu0 = process.cpuUsage();
        let n = 0;
        while (performance.now() - t0 < 1500) {
          const i = seq++;
          await Promise.all(clients.map((c) => call(c, i)));
          await Promise.all(clients.map((c) => c.del(k(i))));
          n++;
        }
        const cpu = process.cpuUsage(cpu0);
        const rate = (n / (performance.now() - t0)) * 1000;
        console.log(
          `${pass} ${name.padEnd(22)} ${rate.toFixed(0).padStart(6)} pairs/s  ${((cpu.user + cpu.system) / n).toFixed(1)} µs Node CPU per pair`,
        );
      }
    }
  } finally {
    for (const c of clients) c.disconnect();
    await masters.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
