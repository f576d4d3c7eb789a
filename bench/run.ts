/**
 * `npm run bench`: side-by-side benchmark of Redlock clients on local redis-server masters.
 *
 *   npm run bench                         full run (3 and 5 masters, 5 rounds, HTTP; ~4 min)
 *   npm run bench -- --quick              short run (2 rounds, short windows)
 *   npm run bench -- --rounds 5           more rounds
 *   npm run bench -- --only contended     one scenario: uncontended | parallel | contended |
 *                                         fencing | http (repeatable, or comma-separated)
 *   npm run bench -- --masters 3          only one topology
 *
 * Every library runs in the same process against the same masters and the same ioredis clients,
 * interleaved (A, B, C, A, B, C, ...) over several rounds; the tables show medians over rounds.
 * Prints markdown; writes everything measured to bench/results/latest.json.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { RedisMasters } from '../test/harness/redis-masters';
import {
  BENCH_SETTINGS,
  Contender,
  Unavailable,
  isUnavailable,
  nodeRedlock,
  oursEngine,
  rawFloor,
  redisSemaphore,
  redlockUniversal,
  sesameRedlock,
} from './contenders';
import { HttpResult, runHttp } from './http';
import { oursNest } from './nest-contender';
import { contended, parallel, sequential } from './scenarios';
import { fmt, fmtRatio, median } from './stats';

type ScenarioId = 'uncontended' | 'parallel' | 'contended' | 'fencing' | 'http';
const SCENARIOS: readonly ScenarioId[] = [
  'uncontended',
  'parallel',
  'contended',
  'fencing',
  'http',
];

interface Options {
  rounds: number;
  quick: boolean;
  only: Set<ScenarioId>;
  masters: number[];
  /** Window per contender per round, ms. */
  seqMs: number;
  parMs: number;
  contMs: number;
  httpSeconds: number;
}

const PARALLEL = 64;
const CONTENDERS_WORKERS = 16;
const CRITICAL_MS = 1;

function parseArgs(argv: string[]): Options {
  let quick = false;
  let rounds: number | undefined;
  const only = new Set<ScenarioId>();
  let masters = [3, 5];
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
        'usage: npm run bench -- [--quick] [--rounds N] [--only SCENARIO[,..]] [--masters 3,5]',
      );
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (rounds !== undefined && !(Number.isInteger(rounds) && rounds >= 1))
    throw new Error('--rounds must be a positive integer');
  if (!masters.every((n) => Number.isInteger(n) && n >= 1 && n <= 9))
    throw new Error('--masters takes counts between 1 and 9');
  if (only.size === 0) for (const s of SCENARIOS) only.add(s);
  return {
    rounds: rounds ?? (quick ? 2 : 5),
    quick,
    only,
    masters,
    seqMs: quick ? 300 : 600,
    parMs: quick ? 300 : 600,
    contMs: quick ? 700 : 1000,
    httpSeconds: quick ? 2 : 5,
  };
}

/** Median-over-rounds metrics of one contender in one scenario. */
type Metrics = Record<string, number>;

interface ScenarioSummary {
  rows: { id: string; label: string; kind: Contender['kind']; metrics: Metrics }[];
  unavailable: Unavailable[];
}

interface TopologyReport {
  masters: number;
  rounds: Record<string, Record<string, Metrics[]>>;
  summary: Record<string, ScenarioSummary>;
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

/** CPU seconds (user + system) used so far by all masters' redis-server processes, in µs. */
async function redisCpuMicros(clients: import('ioredis').Redis[]): Promise<number> {
  const infos = await Promise.all(clients.map((c) => c.info('cpu')));
  let total = 0;
  for (const info of infos) {
    const user = /used_cpu_user:([\d.]+)/.exec(info)?.[1];
    const sys = /used_cpu_sys:([\d.]+)/.exec(info)?.[1];
    total += (Number(user) + Number(sys)) * 1e6;
  }
  return total;
}

async function buildContenders(
  clients: import('ioredis').Redis[],
): Promise<{ live: Contender[]; unavailable: Unavailable[] }> {
  const all: (Contender | Unavailable)[] = [
    await rawFloor(clients),
    oursEngine(clients, true),
    oursEngine(clients, false),
    await oursNest(clients).catch((err: unknown): Unavailable => ({
      id: 'ours-nest',
      label: 'nestjs-redlock, RedlockService.using() in Nest',
      kind: 'ours',
      reason: `n/a (${err instanceof Error ? err.message : String(err)})`,
    })),
    nodeRedlock(clients),
    sesameRedlock(clients),
    redisSemaphore(clients),
    await redlockUniversal(clients),
  ];
  return {
    live: all.filter((c): c is Contender => !isUnavailable(c)),
    unavailable: all.filter(isUnavailable),
  };
}

/** Which contenders take part in which scenario. */
function participants(scenario: ScenarioId, live: Contender[], only: Set<ScenarioId>): Contender[] {
  if (scenario === 'contended') return live.filter((c) => c.id !== 'ours-nofence');
  if (!only.has('uncontended') && !only.has('parallel')) {
    // --only fencing: just the two configurations of our engine, plus the floor.
    return live.filter((c) => c.id === 'ours' || c.id === 'ours-nofence' || c.kind === 'floor');
  }
  return live;
}

async function runTopology(n: number, opts: Options): Promise<TopologyReport> {
  const lockScenarios: ScenarioId[] = [];
  if (opts.only.has('uncontended') || opts.only.has('fencing')) lockScenarios.push('uncontended');
  if (opts.only.has('parallel') || opts.only.has('fencing')) lockScenarios.push('parallel');
  if (opts.only.has('contended')) lockScenarios.push('contended');
  const report: TopologyReport = { masters: n, rounds: {}, summary: {} };
  if (lockScenarios.length === 0) return report;

  const masters = await RedisMasters.start(n);
  let live: Contender[] = [];
  try {
    const clients = masters.createClients();
    await RedisMasters.ready(clients);
    const built = await buildContenders(clients);
    live = built.live;
    console.error(
      `# ${n} masters: ${live.map((c) => c.id).join(', ')}` +
        (built.unavailable.length
          ? `; unavailable: ${built.unavailable.map((u) => `${u.id} — ${u.reason}`).join('; ')}`
          : ''),
    );

    // Warm-up: JIT, script loading (EVALSHA misses), subscriber connections. Not measured.
    for (const c of live) {
      await sequential(c, opts.quick ? 150 : 300, `warm:${c.id}:s`);
      await parallel(c, opts.quick ? 150 : 300, PARALLEL, `warm:${c.id}:p`);
      if (lockScenarios.includes('contended'))
        await contended(c, 300, CONTENDERS_WORKERS, CRITICAL_MS, `warm:${c.id}:c`);
    }

    for (const s of lockScenarios) {
      report.rounds[s] = {};
      for (const c of participants(s, live, opts.only)) report.rounds[s][c.id] = [];
    }
    for (let r = 0; r < opts.rounds; r++) {
      for (const s of lockScenarios) {
        const list = participants(s, live, opts.only);
        // Interleave A, B, C, ... and rotate the starting contender each round, so that no
        // library always runs first (right after another scenario) or last.
        const order = list.map((_, i) => list[(i + r) % list.length]);
        for (const c of order) {
          const tag = `${c.id}:${n}:${s}:${r}`;
          let m: Metrics;
          const redis0 = await redisCpuMicros(clients);
          if (s === 'uncontended') m = { ...(await sequential(c, opts.seqMs, tag)) };
          else if (s === 'parallel') m = { ...(await parallel(c, opts.parMs, PARALLEL, tag)) };
          else m = { ...(await contended(c, opts.contMs, CONTENDERS_WORKERS, CRITICAL_MS, tag)) };
          // CPU of the redis-server processes per operation (per granted lock when contended).
          m.redisCpuUsPerOp = ((await redisCpuMicros(clients)) - redis0) / (m.ops ?? m.locks);
          report.rounds[s][c.id].push(m);
          console.error(
            `  [${n}m r${r + 1}/${opts.rounds}] ${s.padEnd(11)} ${c.id.padEnd(18)} ` +
              Object.entries(m)
                .map(([k, v]) => `${k}=${fmt(v, v < 100 ? 2 : 0)}`)
                .join(' '),
          );
        }
      }
    }
    for (const s of lockScenarios) {
      const rows = participants(s, live, opts.only).map((c) => {
        const perRound = report.rounds[s][c.id];
        const keys = Object.keys(perRound[0] ?? {});
        const metrics: Metrics = {};
        for (const k of keys) metrics[k] = median(perRound.map((m) => m[k]));
        return { id: c.id, label: c.label, kind: c.kind, metrics };
      });
      report.summary[s] = { rows, unavailable: built.unavailable };
    }
  } finally {
    for (const c of live) await c.close().catch(() => undefined);
    await masters.stop();
  }
  return report;
}

// ---------------------------------------------------------------------------------------------
// Reporting

interface Target {
  masters: number;
  name: string;
  measured: string;
  goal: string;
  pass: boolean | undefined;
}

function bestOther(sum: ScenarioSummary, metric: string, higher: boolean): number {
  const vals = sum.rows.filter((r) => r.kind === 'other').map((r) => r.metrics[metric]);
  const finite = vals.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return NaN;
  return higher ? Math.max(...finite) : Math.min(...finite);
}

function metricOf(sum: ScenarioSummary | undefined, id: string, metric: string): number {
  return sum?.rows.find((r) => r.id === id)?.metrics[metric] ?? NaN;
}

function throughputTable(sum: ScenarioSummary, metric: string, unit: string): string[] {
  const best = bestOther(sum, metric, true);
  const raw = metricOf(sum, 'raw', metric);
  const lines = [
    `| library | ${unit} | p50 ms | p99 ms | Node CPU µs/op | Redis CPU µs/op | vs best other | vs raw floor |`,
    '|---|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const r of sum.rows) {
    lines.push(
      `| ${r.label} | ${fmt(r.metrics[metric])} | ${fmt(r.metrics.p50, 2)} | ${fmt(r.metrics.p99, 2)} | ${fmt(r.metrics.cpuUsPerOp)} | ${fmt(r.metrics.redisCpuUsPerOp)} | ${fmtRatio(r.metrics[metric] / best)} | ${fmtRatio(r.metrics[metric] / raw)} |`,
    );
  }
  for (const u of sum.unavailable) lines.push(`| ${u.label} | ${u.reason} | | | | | | |`);
  return lines;
}

function contendedTable(sum: ScenarioSummary): string[] {
  const bestRate = bestOther(sum, 'locksPerSec', true);
  const bestP99 = bestOther(sum, 'waitP99', false);
  const lines = [
    '| library | locks/s | wait p50 ms | wait p99 ms | locks/s vs best other | wait p99 vs best other |',
    '|---|--:|--:|--:|--:|--:|',
  ];
  for (const r of sum.rows) {
    lines.push(
      `| ${r.label} | ${fmt(r.metrics.locksPerSec)} | ${fmt(r.metrics.waitP50, 1)} | ${fmt(r.metrics.waitP99, 1)} | ${fmtRatio(r.metrics.locksPerSec / bestRate)} | ${fmtRatio(r.metrics.waitP99 / bestP99)} |`,
    );
  }
  for (const u of sum.unavailable) lines.push(`| ${u.label} | ${u.reason} | | | | |`);
  return lines;
}

function targetsOf(rep: TopologyReport): Target[] {
  const t: Target[] = [];
  const n = rep.masters;
  const un = rep.summary.uncontended;
  if (un && un.rows.some((r) => r.kind === 'other')) {
    const ours = metricOf(un, 'ours', 'opsPerSec');
    const ratio = ours / bestOther(un, 'opsPerSec', true);
    t.push({
      masters: n,
      name: 'uncontended ops/s vs best other',
      measured: fmtRatio(ratio),
      goal: '≥ 1.20×',
      pass: Number.isFinite(ratio) ? ratio >= 1.2 : undefined,
    });
  }
  if (un && un.rows.some((r) => r.id === 'raw')) {
    const ratio = metricOf(un, 'raw', 'opsPerSec') / metricOf(un, 'ours', 'opsPerSec');
    t.push({
      masters: n,
      name: 'uncontended: raw floor ops/s ÷ ours',
      measured: fmtRatio(ratio),
      goal: '≤ 1.30×',
      pass: Number.isFinite(ratio) ? ratio <= 1.3 : undefined,
    });
  }
  const par = rep.summary.parallel;
  if (par && par.rows.some((r) => r.kind === 'other')) {
    const ratio = metricOf(par, 'ours', 'opsPerSec') / bestOther(par, 'opsPerSec', true);
    t.push({
      masters: n,
      name: `${PARALLEL} parallel ops/s vs best other`,
      measured: fmtRatio(ratio),
      goal: '≥ 1.50×',
      pass: Number.isFinite(ratio) ? ratio >= 1.5 : undefined,
    });
  }
  const con = rep.summary.contended;
  if (con && con.rows.some((r) => r.kind === 'other')) {
    const p99 = metricOf(con, 'ours', 'waitP99') / bestOther(con, 'waitP99', false);
    t.push({
      masters: n,
      name: 'contended wait p99 vs best other (lowest p99)',
      measured: fmtRatio(p99),
      goal: '≤ 0.10×',
      pass: Number.isFinite(p99) ? p99 <= 0.1 : undefined,
    });
    const rate = metricOf(con, 'ours', 'locksPerSec') / bestOther(con, 'locksPerSec', true);
    t.push({
      masters: n,
      name: 'contended locks/s vs best other (highest)',
      measured: fmtRatio(rate),
      goal: '≥ 1.00×',
      pass: Number.isFinite(rate) ? rate >= 1 : undefined,
    });
  }
  return t;
}

function fencingLines(reps: TopologyReport[]): string[] {
  const lines = [
    '| masters | scenario | fencing on ops/s | fencing off ops/s | on ÷ off |',
    '|--:|---|--:|--:|--:|',
  ];
  let any = false;
  for (const rep of reps) {
    for (const s of ['uncontended', 'parallel']) {
      const sum = rep.summary[s];
      const on = metricOf(sum, 'ours', 'opsPerSec');
      const off = metricOf(sum, 'ours-nofence', 'opsPerSec');
      if (!Number.isFinite(on) || !Number.isFinite(off)) continue;
      any = true;
      lines.push(
        `| ${rep.masters} | ${s === 'parallel' ? `${PARALLEL} parallel` : s} | ${fmt(on)} | ${fmt(off)} | ${fmtRatio(on / off)} |`,
      );
    }
  }
  return any ? lines : [];
}

function codesOf(codes: Record<string, number>): string {
  const list = Object.entries(codes).filter(([, n]) => n > 0);
  return list.length ? ` (${list.map(([c, n]) => `${n}× ${c}`).join(', ')})` : '';
}

function httpLines(h: HttpResult): string[] {
  const lines = [
    `${h.connections} connections, ${h.seconds} s per endpoint, ${h.rounds} round(s), ${h.masters} masters; medians over rounds. ${h.note}`,
    '',
    '| endpoint | req/s | p50 ms | p99 ms | non-2xx (all rounds) | errors | vs plain |',
    '|---|--:|--:|--:|--:|--:|--:|',
  ];
  const plain = h.rows.find((r) => r.id === 'plain')?.reqPerSec ?? NaN;
  for (const r of h.rows) {
    lines.push(
      `| ${r.label} | ${fmt(r.reqPerSec)} | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} | ${fmt(r.non2xx)}${codesOf(r.codes)} | ${fmt(r.errors)} | ${fmtRatio(r.reqPerSec / plain)} |`,
    );
  }
  for (const u of h.unavailable) lines.push(`| ${u.label} | ${u.reason} | | | | | |`);
  return lines;
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
    rounds: opts.rounds,
    quick: opts.quick,
    loadAverageAtStart: loadavg().map((x) => Math.round(x * 100) / 100),
    windowsMs: { uncontended: opts.seqMs, parallel: opts.parMs, contended: opts.contMs },
    settings: BENCH_SETTINGS,
  };

  const reports: TopologyReport[] = [];
  for (const n of opts.masters) reports.push(await runTopology(n, opts));
  let http: HttpResult | undefined;
  if (opts.only.has('http')) http = await runHttp(opts.httpSeconds, opts.quick ? 1 : 2);

  const loadAtEnd = loadavg().map((x) => Math.round(x * 100) / 100);
  const out: string[] = [];
  out.push(
    `Measured ${meta.date.slice(0, 10)} on ${meta.cpu} (${meta.memoryGiB} GiB), ${meta.platform}, Node ${meta.node}, redis-server ${meta.redis}; ` +
      `all masters local (127.0.0.1), ${opts.rounds} rounds, contenders interleaved within each round, medians over rounds; load average ${meta.loadAverageAtStart[0]} at start, ${loadAtEnd[0]} at end. ` +
      `ttl ${BENCH_SETTINGS.ttl} ms, retry delay ${BENCH_SETTINGS.retryDelay} ± ${BENCH_SETTINGS.retryJitter} ms for every library that has the setting.`,
  );
  const targets: Target[] = [];
  for (const rep of reports) {
    const { uncontended: un, parallel: par, contended: con } = rep.summary;
    if (un) {
      out.push('', `### ${rep.masters} masters — (1) uncontended, sequential acquire + release`);
      out.push(`One caller, a new resource each time, ${opts.seqMs} ms per library per round.`, '');
      out.push(...throughputTable(un, 'opsPerSec', 'ops/s'));
    }
    if (par) {
      out.push('', `### ${rep.masters} masters — (2) ${PARALLEL} concurrent independent resources`);
      out.push(
        `${PARALLEL} callers, each on its own resources, ${opts.parMs} ms per library per round; p50/p99 of acquire + release.`,
        '',
      );
      out.push(...throughputTable(par, 'opsPerSec', 'ops/s'));
    }
    if (con) {
      out.push(
        '',
        `### ${rep.masters} masters — (3) contended: ${CONTENDERS_WORKERS} workers, one resource`,
      );
      out.push(
        `Each worker: acquire, hold ${CRITICAL_MS} ms, release, repeat; ${opts.contMs} ms per library per round. Wait = acquire call to lock held.`,
        '',
      );
      out.push(...contendedTable(con));
    }
    targets.push(...targetsOf(rep));
  }
  const fence = fencingLines(reports);
  if (fence.length) {
    out.push('', '### (4) Cost of fencing tokens (our engine, fencing on vs off)', '', ...fence);
  }
  if (http)
    out.push(
      '',
      '### (5) HTTP: Nest Express endpoint with and without `@Locked`',
      '',
      ...httpLines(http),
    );
  if (targets.length) {
    out.push('', '### Targets (reported, not asserted)', '');
    out.push('| masters | target | measured | goal | result |', '|--:|---|--:|--:|---|');
    for (const t of targets) {
      out.push(
        `| ${t.masters} | ${t.name} | ${t.measured} | ${t.goal} | ${t.pass === undefined ? 'n/a' : t.pass ? 'PASS' : 'MISS'} |`,
      );
    }
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

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
