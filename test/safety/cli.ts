/**
 * `npm run test:safety -- [--duration <s>] [--workers <n>] [--no-quarantine] [--no-clock-check]
 * [--fairness <mode>] [--faults <kinds>] [--seed <n>] [--keep-logs]`
 * runs one safety soak (controller.ts) and prints the checker's report; exits 1 on any violation.
 * `npm run test:safety -- --check <dir>` re-checks the logs of an earlier run.
 * test/safety/README.md describes the faults, the checks and the published results.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../harness/paths';
import { CheckReport, checkRun, formatReport } from './checker';
import { RunInfo, runSoak } from './controller';
import { FAULT_KINDS, FaultKind } from './protocol';

interface Args {
  duration: number;
  workers: number;
  noQuarantine: boolean;
  clockCheck: boolean;
  fairness: 'local' | 'across-processes';
  keepLogs: boolean;
  check: string | undefined;
  faults: FaultKind[] | undefined;
  seed: number | undefined;
}

const USAGE = `usage: test:safety [--duration <seconds, default 20>] [--workers <n, default 3>] [--no-quarantine]
                   [--no-clock-check] [--fairness local|across-processes]
                   [--faults <kind,...>] [--seed <n>] [--keep-logs]
       test:safety --check <dir>
fault kinds: ${FAULT_KINDS.join(', ')}`;

function parse(argv: readonly string[]): Args {
  const args: Args = {
    duration: 20,
    workers: 3,
    noQuarantine: false,
    clockCheck: true,
    fairness: 'local',
    keepLogs: false,
    check: undefined,
    faults: undefined,
    seed: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value\n${USAGE}`);
      return v;
    };
    const positive = (v: string): number => {
      const n = Number(v);
      if (!Number.isFinite(n) || n <= 0)
        throw new Error(`${a} must be a positive number\n${USAGE}`);
      return n;
    };
    if (a === '--duration') args.duration = positive(value());
    else if (a === '--workers') args.workers = Math.max(2, Math.floor(positive(value())));
    else if (a === '--no-quarantine') args.noQuarantine = true;
    else if (a === '--no-clock-check') args.clockCheck = false;
    else if (a === '--seed') {
      const v = Number(value());
      if (!Number.isSafeInteger(v) || v < 0) throw new Error(`bad --seed\n${USAGE}`);
      args.seed = v;
    } else if (a === '--fairness') {
      const v = value();
      if (v !== 'local' && v !== 'across-processes')
        throw new Error(`bad --fairness ${v}\n${USAGE}`);
      args.fairness = v;
    } else if (a === '--keep-logs') args.keepLogs = true;
    else if (a === '--check') args.check = value();
    else if (a === '--faults') {
      const list = value().split(',');
      const bad = list.filter((k) => !(FAULT_KINDS as readonly string[]).includes(k));
      if (bad.length) throw new Error(`unknown fault kind(s) ${bad.join(', ')}\n${USAGE}`);
      args.faults = list as FaultKind[];
    } else if (a === '--help' || a === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown argument ${a}\n${USAGE}`);
  }
  return args;
}

function finish(report: CheckReport, run: RunInfo | undefined): never {
  if (run) {
    console.log(
      `seed:              ${run.seed} (${run.durationMs / 1000} s, ${run.workers} workers, quarantine ${run.noQuarantine ? 'OFF' : 'on'}, clock check ${run.clockCheck ? 'on' : 'OFF'}, fairness ${run.fairness})`,
    );
  }
  console.log(formatReport(report));
  process.exit(report.violations.length > 0 ? 1 : 0);
}

/** The commit the soak runs on (with `+changes` when the tree differs from it), when known. */
function commit(): string {
  try {
    const git = (...a: string[]): string =>
      execFileSync('git', a, {
        cwd: REPO_ROOT,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }).trim();
    const dirty = git('status', '--porcelain', '--', 'lib', 'test/safety', 'test/harness') !== '';
    return `${git('rev-parse', '--short', 'HEAD')}${dirty ? ' +changes in lib/ or test/' : ''}`;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

async function main(): Promise<void> {
  const args = parse(process.argv.slice(2));
  if (args.check) {
    let run: RunInfo | undefined;
    try {
      run = JSON.parse(readFileSync(join(args.check, 'run.json'), 'utf8')) as RunInfo;
    } catch {
      run = undefined;
    }
    finish(checkRun(args.check), run);
  }
  const t = (): string => `[${((Date.now() - began) / 1000).toFixed(1).padStart(5)} s]`;
  const began = Date.now();
  console.log(
    `safety soak: ${args.duration} s of faults, ${args.workers} workers, quarantine ${args.noQuarantine ? 'OFF (--no-quarantine)' : 'on'}, clock check ${args.clockCheck ? 'on' : 'OFF (--no-clock-check)'}, fairness ${args.fairness}; commit ${commit()}`,
  );
  const result = await runSoak({
    durationMs: args.duration * 1000,
    workers: args.workers,
    noQuarantine: args.noQuarantine,
    clockCheck: args.clockCheck,
    fairness: args.fairness,
    keepLogs: args.keepLogs,
    faults: args.faults,
    seed: args.seed,
    log: (line) => console.log(`${t()} ${line}`),
  });
  console.log(`run took ${(result.elapsedMs / 1000).toFixed(1)} s`);
  if (result.logsKept) console.log(`logs: ${result.dir}`);
  finish(result.report, result.run);
}

// Ctrl-C: exit through process.exit so that the 'exit' hooks kill workers and redis-servers.
process.once('SIGINT', () => process.exit(130));
process.once('SIGTERM', () => process.exit(143));
main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(2);
});
