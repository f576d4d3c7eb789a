/**
 * Probe of the multi-process scenario's warm-up (bench/README.md, "Scenarios"): in fresh worker
 * pools (`ProcessPool`, the 4 × 4 workers of `npm run bench`), each library's first measured
 * run after its unmeasured warm run of WARM ms, then RUNS − 1 more, libraries interleaved. A
 * library whose first run reads lower than its later ones was not warm yet: the warm run is
 * too short for it.
 *
 *   BENCH_QUICK=1 WARM=300 PASSES=3 RUNS=2 npx ts-node --transpile-only bench/warm-probe.ts
 *   LIBS=ours,redlock-universal (default) | any ids of bench/contenders.ts
 *
 * BENCH_QUICK=1 shortens our engine's restart quarantine on the probe's fresh masters (10 s
 * instead of 61 s); the first pass also runs right after it ended, so read the later passes.
 */
import { RedisMasters } from '../test/harness/redis-masters';
import type { ContenderId } from './contenders';
import { ProcessPool } from './multiproc';

async function main(): Promise<void> {
  const masters = await RedisMasters.start(5);
  const libs = (process.env.LIBS ?? 'ours,redlock-universal').split(',') as ContenderId[];
  const passes = Number(process.env.PASSES ?? 3);
  const runs = Number(process.env.RUNS ?? 2);
  const warmMs = Number(process.env.WARM ?? 300);
  try {
    for (let pass = 0; pass < passes; pass++) {
      const pool = await ProcessPool.start(4, masters.urls, warmMs);
      const out: string[] = [];
      try {
        for (let i = 0; i < runs; i++) {
          for (const lib of libs) {
            const r = await pool.run(
              lib,
              '10ms',
              `warm-probe:${pass}:${lib}:${i}`,
              2000,
              4,
              1,
              10_000,
            );
            out.push(`${lib}#${i}=${typeof r === 'string' ? r : Math.round(r.locksPerSec)}`);
          }
        }
      } finally {
        pool.close();
      }
      console.log(`pass ${pass} (warm ${warmMs} ms), locks/s: ${out.join(' ')}`);
    }
  } finally {
    await masters.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
