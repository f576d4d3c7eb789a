/**
 * Probe (not a side-by-side scenario): what the acquire script's parts cost a whole round on this
 * machine. One caller sends a round of one `EVALSHA` to each of 5 fresh masters, then a round of
 * `DEL`s of the key, for 1.5 s per variant, 4 interleaved passes; prints rounds per second (an
 * acquire round and its `DEL` round) and the Node CPU per pair.
 *
 *   npx ts-node --transpile-only bench/script-rounds.ts
 *
 * Variants: a bare `SET NX PX` script (the floor); ACQUIRE_SCRIPT as the engine sends a first
 * attempt (lock key, fencing counter, writer-waiting flag, poll mark, order, boot marker; the
 * marker value known old); the same without the marker check, without fencing, without the order
 * key; and with none of them (one key). Written for session 20 (bench/README.md, "Object spreads
 * on the hot path": "What a round costs").
 */
import type { Redis } from 'ioredis';
import { RedisMasters } from '../test/harness/redis-masters';
import { ACQUIRE_SCRIPT } from '../lib/core/scripts/mutex';

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
    const side = (i: number): string[] => [`b:wait:{r${i}}`, `b:poll:{r${i}}`];
    const fence = (i: number): string => `b:fence:{f${i % 64}}`;
    const variants: Variant[] = [
      ['SET NX PX script', (c, i) => c.evalsha(setnx, 1, k(i), TOKEN, '10000')],
      [
        'acquire, all parts',
        (c, i) =>
          c.evalsha(
            acq,
            6,
            k(i),
            fence(i),
            ...side(i),
            `b:order:{r${i}}`,
            'b:boot',
            TOKEN,
            '10000',
            '1',
            BIRTH,
            '1',
            '3600000',
            '400',
            '',
            '0',
            '1795788993662',
          ),
      ],
      [
        'acquire, no marker',
        (c, i) =>
          c.evalsha(
            acq,
            5,
            k(i),
            fence(i),
            ...side(i),
            `b:order:{r${i}}`,
            TOKEN,
            '10000',
            '1',
            '0',
            '1',
            '3600000',
            '400',
            '',
            '0',
            '1795788993662',
          ),
      ],
      [
        'acquire, no fencing',
        (c, i) =>
          c.evalsha(
            acq,
            5,
            k(i),
            ...side(i),
            `b:order:{r${i}}`,
            'b:boot',
            TOKEN,
            '10000',
            '0',
            BIRTH,
            '1',
            '3600000',
            '400',
            '',
            '0',
            '1795788993662',
          ),
      ],
      [
        'acquire, no order',
        (c, i) =>
          c.evalsha(
            acq,
            5,
            k(i),
            fence(i),
            ...side(i),
            'b:boot',
            TOKEN,
            '10000',
            '1',
            BIRTH,
            '1',
            '3600000',
            '400',
            '',
            '0',
          ),
      ],
      [
        'acquire, none of them',
        (c, i) => c.evalsha(acq, 1, k(i), TOKEN, '10000', '0', '0', '1', '3600000'),
      ],
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
