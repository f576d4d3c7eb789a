/**
 * Probe, our engine only (not a side-by-side scenario): E engines — each over its own
 * connections, as separate processes would be, in one Node process — with C callers each take
 * one resource in turns (held 1 ms, as in the benchmark's contended scenarios), for D ms:
 *
 *   E=3 C=2 npx ts-node --transpile-only bench/few-callers.ts
 *
 * Environment: E (engines, 3), C (callers per engine, 2), D (window ms, 4000), RD (retry delay
 * ms, 10; jitter 10, or 100 at 200), MASTERS (5). Quarantine off (fresh masters). Prints locks/s,
 * the mean, p99 and longest wait, the longest wait ÷ the mean, each engine's count of locks and
 * its longest wait, and the first turns (`A5 B5 C5`: engine A took the lock 5 times in a row).
 * Written for the fair mode's passes and kept queues (lib/core/fair/README.md).
 */
import { Redlock } from '../lib/core/redlock';
import { RedisMasters } from '../test/harness/redis-masters';
import { probeSettings } from './config';

const E = Number(process.env.E ?? 3);
const C = Number(process.env.C ?? 2);
const D = Number(process.env.D ?? 4000);
const RD = Number(process.env.RD ?? 10);
const MASTERS = Number(process.env.MASTERS ?? 5);
const NAMES = 'ABCDEFGHIJKLMNOP';

async function main(): Promise<void> {
  const masters = await RedisMasters.start(MASTERS);
  const engines = Array.from(
    { length: E },
    () => new Redlock(masters.createClients(), probeSettings(RD)),
  );
  try {
    for (const e of engines) await (await e.acquire(`warm:${Math.random()}`)).release();
    const resource = `few:${Math.random()}`;
    const waits: number[][] = engines.map(() => []);
    const turns: string[] = [];
    let holders = 0;
    let overlaps = 0;
    let stop = false;
    const start = performance.now();
    await Promise.all(
      engines.flatMap((engine, e) =>
        Array.from({ length: C }, async () => {
          while (!stop) {
            const asked = performance.now();
            const lock = await engine.acquire(resource);
            waits[e].push(performance.now() - asked);
            turns.push(NAMES[e]);
            if (holders++ > 0) overlaps++;
            await new Promise((r) => setTimeout(r, 1));
            holders--;
            await lock.release();
            if (performance.now() - start > D) stop = true;
          }
        }),
      ),
    );
    const all = waits.flat().sort((a, b) => a - b);
    const mean = all.reduce((s, w) => s + w, 0) / all.length;
    const longest = all[all.length - 1];
    const runs: string[] = [];
    for (let i = 0; i < turns.length;) {
      let j = i;
      while (j < turns.length && turns[j] === turns[i]) j++;
      runs.push(`${turns[i]}${j - i}`);
      i = j;
    }
    console.log(
      `E=${E} C=${C} retry=${RD}ms locks/s=${(all.length / (D / 1000)).toFixed(0)} ` +
        `mean=${mean.toFixed(1)} p99=${all[Math.floor(all.length * 0.99)].toFixed(1)} ` +
        `longest=${longest.toFixed(0)} longest/mean=${(longest / mean).toFixed(1)} overlaps=${overlaps}`,
    );
    console.log(
      `  per engine: ${waits.map((w, e) => `${NAMES[e]} ${w.length} locks, longest ${Math.max(...w).toFixed(0)} ms`).join(' | ')}`,
    );
    console.log(`  turns: ${runs.slice(0, 30).join(' ')}`);
  } finally {
    await Promise.all(engines.map((e) => e.close()));
    await masters.stop();
  }
}

void main();
