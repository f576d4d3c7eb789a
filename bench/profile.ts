/**
 * Runs ONE contender in ONE scenario for a while, for profiling:
 *
 *   PROFILE_OUT=bench/results/ours.cpuprofile npx ts-node --transpile-only \
 *     bench/profile.ts ours uncontended 5000 5
 *
 * Arguments: contender id (one of CONTENDER_IDS in bench/contenders.ts: ours | ours-nofence |
 * ours-noquarantine | ours-nohandoff | ours-noclock | raw | node-redlock | …), scenario
 * (uncontended | reused | parallel | contended; reused = uncontended on the 50 names of the
 * reused-names scenario, warmed by the warm-up run), window in ms, masters.
 * Prints the scenario's result and the Redis commands per operation. With `PROFILE_OUT`, the
 * measured window alone is CPU-profiled (node:inspector, 50 µs sampling; not the start-up, the
 * TypeScript compilation, the restart-quarantine wait or the warm-up, which a whole-process
 * `node --cpu-prof` mixes in), written there, and summarized per operation
 * (bench/profile-summary.ts); open the file in Chrome DevTools or speedscope for more.
 */
import { writeFileSync } from 'node:fs';
import { RedisMasters } from '../test/harness/redis-masters';
import { SLOW_RETRY } from './config';
import { CONTENDER_IDS, Contender, ContenderId, isUnavailable, makeContender } from './contenders';
import { contended, parallel, reusedName, sequential } from './scenarios';
import { profiled } from './inspector';
import { formatSummary, summarizeProfile } from './profile-summary';

async function main(): Promise<void> {
  const [id = 'ours', scenario = 'uncontended', windowArg = '5000', mastersArg = '3'] =
    process.argv.slice(2);
  const masters = await RedisMasters.start(Number(mastersArg));
  let c: Contender | undefined;
  try {
    const clients = masters.createClients();
    await RedisMasters.ready(clients);
    if (!CONTENDER_IDS.includes(id as ContenderId)) throw new Error(`unknown contender ${id}`);
    // Quick-mode maxTtl (10 s): the restart quarantine (on, as by default) is waited out in ~10 s
    // instead of ~61 s; the per-lock work is the same.
    const made = await makeContender(id as ContenderId, clients, SLOW_RETRY, true);
    if (isUnavailable(made)) throw new Error(made.reason);
    c = made;
    await c.ready?.(120_000);
    const windowMs = Number(windowArg);
    const run = (ms: number, tag: string): Promise<object> =>
      scenario === 'parallel'
        ? parallel(c as Contender, ms, 64, tag)
        : scenario === 'contended'
          ? contended(c as Contender, ms, 16, 1, tag)
          : scenario === 'reused'
            ? sequential(c as Contender, ms, tag, reusedName)
            : sequential(c as Contender, ms, tag);
    await run(500, 'warm');
    await Promise.all(clients.map((cl) => cl.config('RESETSTAT')));
    const out = process.env.PROFILE_OUT;
    const measured = out
      ? await profiled(() => run(windowMs, 'prof'))
      : { result: await run(windowMs, 'prof'), profile: undefined };
    const result = measured.result as { ops?: number; locks?: number };
    console.log(id, scenario, result);
    // Server side: commands and Redis CPU (usec) per operation, summed over the masters.
    const ops = result.ops ?? result.locks ?? 1;
    if (out && measured.profile) {
      writeFileSync(out, JSON.stringify(measured.profile));
      console.log(`CPU profile of the window: ${out}`);
      console.log(formatSummary(summarizeProfile(measured.profile, ops)));
    }
    const perCommand = new Map<string, { calls: number; usec: number }>();
    for (const cl of clients) {
      const info = await cl.info('commandstats');
      for (const m of info.matchAll(/cmdstat_(\S+?):calls=(\d+),usec=(\d+)/g)) {
        const e = perCommand.get(m[1]) ?? { calls: 0, usec: 0 };
        e.calls += Number(m[2]);
        e.usec += Number(m[3]);
        perCommand.set(m[1], e);
      }
    }
    for (const [name, e] of perCommand) {
      if (name === 'config' || name === 'info') continue;
      console.log(
        `  redis ${name.padEnd(10)} ${(e.calls / ops).toFixed(2)} calls/op  ${(e.usec / ops).toFixed(1)} µs/op (all masters)`,
      );
    }
  } finally {
    await c?.close();
    await masters.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
