/**
 * Before/after check of our engine alone: uncontended acquire + release and 64 parallel callers,
 * this checkout against a baseline checkout (`REDLOCK_BASELINE=/path/to/old/checkout`, e.g. a
 * `git worktree add` of an older commit sharing this node_modules), same masters, same settings,
 * interleaved rounds, medians. Not a comparison with other libraries (that is `npm run bench`).
 *
 *   REDLOCK_BASELINE=../old node -r ts-node/register/transpile-only bench/compare-baseline.ts [--fresh]
 *
 * Resources are reused (1,000 for one caller, 100 per parallel caller) unless `--fresh` is given:
 * then every lock is on a resource never locked before, as in `npm run bench`.
 */
/* eslint-disable @typescript-eslint/no-explicit-any, @typescript-eslint/no-require-imports */
import path from 'node:path';
import { RedisMasters } from '../test/harness/redis-masters';

const BASELINE = path.resolve(process.env.REDLOCK_BASELINE ?? '');
const FRESH = process.argv.includes('--fresh');
let fresh = 0;
/** The resource of lock `n` of a series: reused (`n % reuse`), or never locked before. */
const name = (series: string, n: number, reuse: number): string =>
  FRESH ? `${series}f${fresh++}` : `${series}${n % reuse}`;

async function main(): Promise<void> {
  const masters = await RedisMasters.start(5);
  const clients = masters.createClients();
  await RedisMasters.ready(clients);
  const engines: Record<string, any> = {
    old: new (require(path.join(BASELINE, 'lib/core/redlock')).Redlock)(clients, {
      quarantine: false,
      keyPrefix: 'old:',
    }),
    new: new (require(path.join(__dirname, '../lib/core/redlock')).Redlock)(clients, {
      quarantine: false,
      keyPrefix: 'new:',
    }),
  };
  const seq = async (e: any, ms: number): Promise<number> => {
    let n = 0;
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const l = await e.acquire(name('r', n, 1000), { ttl: 10000 });
      await e.release(l);
      n++;
    }
    return (n * 1000) / ms;
  };
  const par = async (e: any, ms: number): Promise<number> => {
    let n = 0;
    const end = Date.now() + ms;
    await Promise.all(
      Array.from({ length: 64 }, async (_, w) => {
        while (Date.now() < end) {
          const l = await e.acquire(name(`p${w}:`, n, 100), { ttl: 10000 });
          await e.release(l);
          n++;
        }
      }),
    );
    return (n * 1000) / ms;
  };
  for (const k of ['old', 'new']) await seq(engines[k], 500);
  const res: Record<string, number[]> = {
    'old seq': [],
    'new seq': [],
    'old par': [],
    'new par': [],
  };
  for (let round = 0; round < 5; round++) {
    for (const k of round % 2 ? ['new', 'old'] : ['old', 'new']) {
      res[`${k} seq`].push(await seq(engines[k], 3000));
      res[`${k} par`].push(await par(engines[k], 3000));
    }
  }
  const med = (a: number[]) => [...a].sort((x, y) => x - y)[2];
  for (const [k, v] of Object.entries(res))
    console.log(k, v.map(Math.round).join(' '), 'median', Math.round(med(v)));
  console.log(
    'new/old seq',
    (med(res['new seq']) / med(res['old seq'])).toFixed(2),
    'par',
    (med(res['new par']) / med(res['old par'])).toFixed(2),
  );
  for (const e of Object.values(engines)) await e.close();
  for (const c of clients) c.disconnect();
  await masters.stop();
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
