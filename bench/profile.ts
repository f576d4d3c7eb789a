/**
 * Runs ONE contender in ONE scenario for a while, for profiling:
 *
 *   node --cpu-prof --cpu-prof-dir=bench/results/prof -r ts-node/register/transpile-only \
 *     bench/profile.ts ours uncontended 5000 3
 *
 * Arguments: contender id (ours | ours-nofence | raw | node-redlock | sesamecare |
 * redis-semaphore | redlock-universal), scenario (uncontended | parallel | contended), window in ms, masters.
 * Prints the scenario's result; open the .cpuprofile in Chrome DevTools or speedscope.
 */
import { RedisMasters } from '../test/harness/redis-masters';
import { SLOW_RETRY } from './config';
import { CONTENDER_IDS, Contender, ContenderId, isUnavailable, makeContender } from './contenders';
import { contended, parallel, sequential } from './scenarios';

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
          : sequential(c as Contender, ms, tag);
    await run(500, 'warm');
    await Promise.all(clients.map((cl) => cl.config('RESETSTAT')));
    const result = (await run(windowMs, 'prof')) as { ops?: number; locks?: number };
    console.log(id, scenario, result);
    // Server side: commands and Redis CPU (usec) per operation, summed over the masters.
    const ops = result.ops ?? result.locks ?? 1;
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
