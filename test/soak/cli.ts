/**
 * `npm run soak -- [--duration <s, default 600>] [--waiters <n, default 1000>]` runs the stability
 * soak (soak.ts) on its own local redis-servers, prints a table and exits 1 when it found a leak,
 * a warning or an unhandled rejection.
 */
import { formatSoak, runSoak } from './soak';

const USAGE = 'usage: soak [--duration <seconds, default 600>] [--waiters <n, default 1000>]';

function parse(argv: readonly string[]): { duration: number; waiters: number } {
  const args = { duration: 600, waiters: 1000 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') {
      console.log(USAGE);
      process.exit(0);
    }
    const n = Number(argv[++i]);
    if (!Number.isInteger(n) || n <= 0) throw new Error(`${a} needs a positive integer\n${USAGE}`);
    if (a === '--duration') args.duration = n;
    else if (a === '--waiters') args.waiters = n;
    else throw new Error(`unknown argument ${a}\n${USAGE}`);
  }
  return args;
}

async function main(): Promise<void> {
  const { duration, waiters } = parse(process.argv.slice(2));
  console.log(
    `soak: ${duration} s, ${waiters} waiters, churn on 200 resources, faults on 3 masters`,
  );
  const result = await runSoak({ durationMs: duration * 1000, waiters, log: console.log });
  console.log(`\n${formatSoak(result)}`);
  process.exit(result.failures.length ? 1 : 0);
}

// Ctrl-C: exit through process.exit so that the 'exit' hook kills the redis-servers.
process.once('SIGINT', () => process.exit(130));
process.once('SIGTERM', () => process.exit(143));
main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.stack : err);
  process.exit(2);
});
