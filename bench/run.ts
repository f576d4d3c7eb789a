/**
 * `npm run bench`: side-by-side benchmark of Redlock clients on local redis-server masters
 *. Every library runs against the same masters with the same settings,
 * interleaved (A, B, C, A, B, C, ...) over several rounds; the tables show medians over rounds.
 *
 *   npm run bench                          full run (5 masters, 3 rounds; see bench/README.md)
 *   npm run bench -- --quick               quick smoke run (also BENCH_QUICK=1), under ~2 min
 *   npm run bench -- --rounds 5            more rounds
 *   npm run bench -- --only contended      some scenarios: uncontended | parallel | contended |
 *                                          multiproc | waiters | cost | http (comma-separated)
 *   npm run bench -- --masters 3,5         other topologies
 *
 * Prints markdown (progress goes to stderr); writes everything measured to
 * bench/results/latest.json (git-ignored). Starts and stops its own redis-servers on 127.0.0.1
 * and its own child processes; stops by itself.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { BENCH_SETTINGS, RETRY_PROFILES, SLOW_RETRY, quickFromEnv } from './config';
import { HttpResult, runHttp } from './http';
import { Options, SCENARIOS, ScenarioId } from './options';
import { TopologyReport, runTopology } from './topology';
import { targetsOf } from './targets';
import { describeRun, renderTopology } from './render';

function parseArgs(argv: string[]): Options {
  let quick = quickFromEnv();
  let rounds: number | undefined;
  const only = new Set<ScenarioId>();
  let masters = [5];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = (): string => {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--quick') quick = true;
    else if (a.startsWith('--rounds')) rounds = Number(value());
    else if (a.startsWith('--only')) {
      for (const s of value().split(',')) {
        if (!SCENARIOS.includes(s as ScenarioId))
          throw new Error(`unknown scenario ${s}; one of ${SCENARIOS.join(', ')}`);
        only.add(s as ScenarioId);
      }
    } else if (a.startsWith('--masters')) masters = value().split(',').map(Number);
    else if (a === '--help' || a === '-h') {
      console.log(
        'usage: npm run bench -- [--quick] [--rounds N] [--only SCENARIO[,..]] [--masters 5[,3]]',
      );
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (rounds !== undefined && !(Number.isInteger(rounds) && rounds >= 1))
    throw new Error('--rounds must be a positive integer');
  if (!masters.every((n) => Number.isInteger(n) && n >= 1 && n <= 9))
    throw new Error('--masters takes counts between 1 and 9');
  if (only.size === 0) for (const s of SCENARIOS) only.add(s);
  // Child processes (workers, HTTP server) read quick mode from the environment.
  if (quick) process.env.BENCH_QUICK = '1';
  return {
    rounds: rounds ?? (quick ? 1 : 3),
    quick,
    only,
    masters,
    // Uncontended and 64 parallel: windows of a few thousand operations. With 600 ms windows
    // one library's rate spread 2–4× across the rounds of one run on a shared machine (fresh
    // names: ours 470–1,900, node-redlock 1,196–2,588 ops/s).
    seqMs: quick ? 200 : 2000,
    parMs: quick ? 200 : 1500,
    contMs: quick ? 500 : 1500,
    multiMs: quick ? 600 : 2000,
    waitersMs: quick ? 2000 : 5000,
    waiters: 10_000,
    waiterRounds: rounds ?? (quick ? 1 : 3),
    costOps: quick ? 300 : 2000,
    httpSeconds: quick ? 1 : 5,
    graceMs: quick ? 1000 : 10_000,
  };
}

function redisVersion(): string {
  try {
    const out = execFileSync(process.env.REDIS_SERVER_BIN ?? 'redis-server', ['--version'], {
      encoding: 'utf8',
    });
    return /v=(\S+)/.exec(out)?.[1] ?? out.trim();
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const meta = {
    date: new Date().toISOString(),
    node: process.versions.node,
    redis: redisVersion(),
    cpu: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}`,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    platform: `${process.platform} ${process.arch}`,
    loadAverageAtStart: loadavg().map((x) => Math.round(x * 100) / 100),
    options: { ...opts, only: [...opts.only] },
    settings: { ...BENCH_SETTINGS, retryProfiles: RETRY_PROFILES },
  };

  const reports: TopologyReport[] = [];
  let http: HttpResult | undefined;
  for (const [i, n] of opts.masters.entries()) {
    // HTTP runs once, on the first topology's masters (out of restart quarantine, its own key
    // prefix included: runTopology's `http`).
    const withHttp = i === 0 && opts.only.has('http');
    reports.push(
      await runTopology(
        n,
        opts,
        async (urls) => {
          if (withHttp) http = await runHttp(urls, opts.httpSeconds, opts.quick ? 1 : 2);
        },
        withHttp,
      ),
    );
  }

  const loadAtEnd = loadavg().map((x) => Math.round(x * 100) / 100);
  const out: string[] = [...describeRun(meta, opts, loadAtEnd, (Date.now() - started) / 1000)];
  const targets = reports.flatMap((rep) => targetsOf(rep));
  for (const rep of reports) out.push(...renderTopology(rep, opts, targetsOf(rep)));
  if (http) {
    out.push('', '### HTTP: Nest Express endpoint with and without `@Locked`', '');
    out.push(...httpLines(http));
  }
  const markdown = out.join('\n');
  console.log(markdown);

  const dir = join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'latest.json');
  writeFileSync(
    file,
    JSON.stringify(
      {
        meta: { ...meta, loadAverageAtEnd: loadAtEnd, durationSec: (Date.now() - started) / 1000 },
        reports,
        http,
        targets,
        markdown,
      },
      null,
      2,
    ),
  );
  console.error(`\nwrote ${file} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

function httpLines(h: HttpResult): string[] {
  const lines = [
    `${h.connections} connections, ${h.seconds} s per endpoint, ${h.rounds} round(s), ${h.masters} masters; medians over rounds; retry delay ${SLOW_RETRY.retryDelay} ms. ${h.note}`,
    '',
    '| endpoint | req/s | p50 ms | p99 ms | non-2xx (all rounds) | errors | vs plain |',
    '|---|--:|--:|--:|--:|--:|--:|',
  ];
  const plain = h.rows.find((r) => r.id === 'plain')?.reqPerSec ?? NaN;
  for (const r of h.rows) {
    const codes = Object.entries(r.codes).filter(([, k]) => k > 0);
    const codeText = codes.length ? ` (${codes.map(([c, k]) => `${k}× ${c}`).join(', ')})` : '';
    lines.push(
      `| ${r.label} | ${r.reqPerSec.toFixed(0)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.non2xx}${codeText} | ${r.errors} | ${(r.reqPerSec / plain).toFixed(2)}× |`,
    );
  }
  return lines;
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
