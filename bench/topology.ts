/**
 * One topology (N masters): starts the masters, builds every library at both retry profiles,
 * waits out our engine's restart quarantine, warms up, then runs the rounds of every scenario,
 * libraries interleaved and the starting library rotated each round; then the many-waiters
 * scenario (one child process per library), the keyspace footprint, and `extra` (HTTP).
 */
import type { Redis } from 'ioredis';
import { Redlock } from '../lib/core';
import { RedisMasters } from '../test/harness/redis-masters';
import {
  CALLERS_PER_PROCESS,
  FEW_CALLERS,
  HTTP_KEY_PREFIX,
  PROCESSES,
  RETRY_PROFILES,
  RetryProfile,
  SLOW_RETRY,
  maxTtlFor,
  untilTrusted,
} from './config';
import {
  CONTENDER_IDS,
  GUARDED_FLOOR_LABELS,
  OURS_LABELS,
  Contender,
  ContenderId,
  Unavailable,
  isUnavailable,
  makeContender,
} from './contenders';
import { Footprint, costOf, footprint } from './cost';
import { ProcessPool } from './multiproc';
import { oursNest } from './nest-contender';
import type { Options } from './options';
import type { Metrics, Row, ScenarioSummary } from './report';
import { REUSED_NAMES, parallel, reusedName, sequential } from './scenarios';
import { fmt, median } from './stats';
import { manyWaiters } from './waiters';

export const PARALLEL = 64;
export const WORKERS = 16;
export { CALLERS_PER_PROCESS, FEW_CALLERS, PROCESSES } from './config';
export const CRITICAL_MS = 1;

/** Everything measured on one topology. */
export interface TopologyReport {
  masters: number;
  /** scenario key → library id → per-round metrics. */
  rounds: Record<string, Record<string, Metrics[]>>;
  summary: Record<string, ScenarioSummary>;
  /** scenario key → library id → notes (warnings, commands per op, errors). */
  notes: Record<string, Record<string, string[]>>;
  footprint: Footprint[];
}

type Lib = Contender | Unavailable;

/** One scenario: its key, which libraries, and how one library runs once. */
interface Plan {
  key: string;
  title: string;
  description: string;
  ids: string[];
  run(id: string, tag: string): Promise<Metrics | string>;
}

function labelOf(id: string): string {
  const labels: Record<string, string> = {
    raw: 'raw floor (SET NX PX + Lua DEL)',
    ...GUARDED_FLOOR_LABELS,
    ...OURS_LABELS,
    'ours-nest': 'nestjs-redlock, RedlockService.using() in Nest',
    'node-redlock': 'redlock 5.0.0-beta.2',
    sesamecare: '@sesamecare-oss/redlock',
    'redis-semaphore': 'redis-semaphore RedlockMutex',
    'redlock-universal': 'redlock-universal',
  };
  return labels[id] ?? id;
}

function kindOf(id: string): Row['kind'] {
  return id.startsWith('raw') ? 'floor' : id.startsWith('ours') ? 'ours' : 'other';
}

/** CPU µs (user + system) used so far by all masters' redis-server processes. */
async function redisCpuMicros(clients: Redis[]): Promise<number> {
  let total = 0;
  for (const info of await Promise.all(clients.map((c) => c.info('cpu')))) {
    const user = Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1]);
    const sys = Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1]);
    total += (user + sys) * 1e6;
  }
  return total;
}

async function buildLibs(clients: Redis[], opts: Options): Promise<Map<string, Lib>> {
  const libs = new Map<string, Lib>();
  for (const p of RETRY_PROFILES) {
    for (const id of CONTENDER_IDS)
      libs.set(`${id}@${p.id}`, await makeContender(id, clients, p, opts.quick));
    libs.set(
      `ours-nest@${p.id}`,
      await oursNest(clients, p, opts.quick).catch((err: unknown): Unavailable => ({
        id: 'ours-nest',
        label: labelOf('ours-nest'),
        kind: 'ours',
        reason: `n/a (${err instanceof Error ? err.message : String(err)})`,
      })),
    );
  }
  return libs;
}

interface Pools {
  /** One worker process with {@link WORKERS} callers (1-process contended scenario). */
  single?: ProcessPool;
  /** {@link PROCESSES} worker processes with {@link CALLERS_PER_PROCESS} callers each. */
  multi?: ProcessPool;
}

function plans(opts: Options, libs: Map<string, Lib>, clients: Redis[], pools: Pools): Plan[] {
  const lib = (id: string, p: RetryProfile): Lib => libs.get(`${id}@${p.id}`) as Lib;
  const withRedisCpu = async (f: () => Promise<object | string>): Promise<Metrics | string> => {
    const r0 = await redisCpuMicros(clients);
    const res = await f();
    if (typeof res === 'string') return res;
    const m = { ...res } as Metrics;
    m.redisCpuUsPerOp = ((await redisCpuMicros(clients)) - r0) / (m.ops ?? m.locks);
    return m;
  };
  const local = (id: string, f: (c: Contender) => Promise<object>): Promise<Metrics | string> => {
    const c = lib(id, SLOW_RETRY);
    return isUnavailable(c) ? Promise.resolve(c.reason) : withRedisCpu(() => f(c));
  };
  const inPool = (
    pool: ProcessPool,
    id: string,
    p: RetryProfile,
    tag: string,
    callers: number,
    windowMs: number,
  ) =>
    withRedisCpu(() =>
      pool.run(id as ContenderId, p.id, tag, windowMs, callers, CRITICAL_MS, opts.graceMs),
    );
  // Uncontended and cost: every row, with what each guarantee costs (one turned off per row).
  const all = [
    'raw',
    'raw-guarded',
    'raw-guarded-nofence',
    'raw-guarded-waitall',
    'ours',
    'ours-nofence',
    'ours-noquarantine',
    'ours-nohandoff',
    'ours-noclock',
    'ours-bare',
    'ours-fair',
    'ours-quorumrelease',
    'ours-node-redis',
    'ours-nest',
    'node-redlock',
    'sesamecare',
    'redis-semaphore',
    'redlock-universal',
  ];
  // 64 parallel: without the quarantine-off, wake-ups-off and all-off rows and the floor whose
  // release waits for every master (run time; with 64 callers the client has work while it waits).
  const parallelIds = all.filter(
    (id) =>
      id !== 'ours-noquarantine' &&
      id !== 'ours-nohandoff' &&
      id !== 'ours-bare' &&
      id !== 'raw-guarded-waitall',
  );
  const contendedIds = [
    'raw',
    'ours',
    'ours-fair',
    'ours-node-redis',
    'node-redlock',
    'sesamecare',
    'redis-semaphore',
    'redlock-universal',
  ];
  const grace = `Callers still waiting ${opts.graceMs} ms after the window are abandoned and counted with their wait so far ("unfinished"; the worker is then replaced).`;
  const out: Plan[] = [];
  if (opts.only.has('uncontended'))
    out.push({
      key: 'uncontended',
      title: 'uncontended acquire + release, fresh names',
      ids: all,
      description: `One caller, a new resource each time, ${opts.seqMs} ms per library per round.`,
      run: (id, tag) => local(id, (c) => sequential(c, opts.seqMs, tag)),
    });
  if (opts.only.has('uncontended'))
    out.push({
      key: 'uncontended-reused',
      title: `uncontended acquire + release, ${REUSED_NAMES} names reused`,
      ids: all,
      description: `One caller, the same ${REUSED_NAMES} resource names in turn (r0 … r${REUSED_NAMES - 1}, then r0 again; the same names for every library, each under its own key prefix, every name already locked once in the warm-up), ${opts.seqMs} ms per library per round.`,
      run: (id, tag) => local(id, (c) => sequential(c, opts.seqMs, tag, reusedName)),
    });
  if (opts.only.has('parallel'))
    out.push({
      key: 'parallel',
      title: `${PARALLEL} parallel, distinct resources`,
      ids: parallelIds,
      description: `${PARALLEL} callers, each on its own resources, ${opts.parMs} ms per library per round; p50/p99 of acquire + release.`,
      run: (id, tag) => local(id, (c) => parallel(c, opts.parMs, PARALLEL, tag)),
    });
  const single = pools.single;
  for (const p of single ? RETRY_PROFILES : [])
    out.push({
      key: `contended-${p.id}`,
      title: `1 process, ${WORKERS} callers, one resource, retry ${p.id}`,
      ids: contendedIds,
      description: `${WORKERS} callers in one worker process, ONE resource: acquire, hold ${CRITICAL_MS} ms, release, repeat; ${opts.contMs} ms per library per round; retry delay ${p.retryDelay} ± ${p.retryJitter} ms. Wait = acquire call to lock held. ${grace}`,
      run: (id, tag) => inPool(single as ProcessPool, id, p, tag, WORKERS, opts.contMs),
    });
  const multi = pools.multi;
  for (const p of multi ? RETRY_PROFILES : [])
    out.push({
      key: `multiproc-${p.id}`,
      title: `${PROCESSES} processes × ${CALLERS_PER_PROCESS} callers, one resource, retry ${p.id}`,
      ids: contendedIds,
      description: `${PROCESSES} worker processes, each with its own clients and library instance, ${CALLERS_PER_PROCESS} callers each, ONE resource: acquire, hold ${CRITICAL_MS} ms, release, repeat; ${opts.multiMs} ms per library per round; retry delay ${p.retryDelay} ± ${p.retryJitter} ms. "overlaps" counts holding intervals of two holders that overlap (absolute clock, 0.1 ms tolerance): must be 0. ${grace}`,
      run: (id, tag) => inPool(multi as ProcessPool, id, p, tag, CALLERS_PER_PROCESS, opts.multiMs),
    });
  for (const p of multi ? RETRY_PROFILES : [])
    out.push({
      key: `multiproc-few-${p.id}`,
      title: `${PROCESSES} processes × ${FEW_CALLERS} caller, one resource, retry ${p.id}`,
      ids: contendedIds,
      description: `The same ${PROCESSES} worker processes with ${FEW_CALLERS} caller each (a service with ${PROCESSES} replicas, each running the same guarded job): acquire, hold ${CRITICAL_MS} ms, release, ask again at once; ${opts.multiMs} ms per library per round; retry delay ${p.retryDelay} ± ${p.retryJitter} ms. No process has a local waiter at a release: the longest wait ÷ the mean shows whether a process starves while others take turns. ${grace}`,
      run: (id, tag) => inPool(multi as ProcessPool, id, p, tag, FEW_CALLERS, opts.multiMs),
    });
  if (opts.only.has('cost'))
    out.push({
      key: 'cost',
      title: 'per-operation cost',
      ids: all,
      description: `${opts.costOps} acquire + release on distinct resources with one caller, then ${opts.costOps} with ${PARALLEL} callers, per library per round. Node µs = process.cpuUsage() delta ÷ ops; Redis µs = INFO commandstats usec delta summed over all masters ÷ ops; keys and bytes left = DBSIZE and used_memory deltas of the one-caller phase ÷ resources ÷ masters; TTL = remaining TTL in s of one key left behind (-1: no TTL). Notes: Redis commands per op (all masters).`,
      run: async (id, tag) => {
        const c = lib(id, SLOW_RETRY);
        if (isUnavailable(c)) return c.reason;
        const { result, commands } = await costOf(c, clients, tag, opts.costOps, PARALLEL);
        const m: Metrics = { ...result };
        for (const [name, per] of Object.entries(commands)) m[`cmd:${name}`] = per;
        return m;
      },
    });
  return out;
}

/**
 * Warms the runner's own instances (sequential and parallel locking, and one lock of each name of
 * the reused-names scenario, so that its rounds all find the names used before); the worker pools
 * warm each library themselves before its first measured run in a worker (ProcessPool.run).
 */
async function warmUp(opts: Options, libs: Map<string, Lib>): Promise<void> {
  const ms = opts.quick ? 120 : 300;
  for (const [key, c] of libs) {
    if (isUnavailable(c) || !key.endsWith(`@${SLOW_RETRY.id}`)) continue;
    await sequential(c, ms, `warm:${key}:s`);
    await parallel(c, ms, PARALLEL, `warm:${key}:p`);
    for (let i = 0; i < REUSED_NAMES; i++) await (await c.lock(reusedName(i))).release();
  }
}

function summarize(
  report: TopologyReport,
  plan: { key: string; title: string; description: string; ids: string[] },
  reasons: Map<string, string>,
): void {
  const rows: Row[] = [];
  const unavailable: ScenarioSummary['unavailable'] = [];
  for (const id of plan.ids) {
    const perRound = report.rounds[plan.key]?.[id] ?? [];
    if (perRound.length === 0) {
      unavailable.push({
        id,
        label: labelOf(id),
        reason: reasons.get(`${plan.key}:${id}`) ?? 'n/a',
      });
      continue;
    }
    const metrics: Metrics = {};
    const keys = new Set(perRound.flatMap((m) => Object.keys(m)));
    for (const k of keys)
      metrics[k] = median(perRound.map((m) => m[k] ?? (k.startsWith('cmd:') ? 0 : NaN)));
    const note = [...new Set(report.notes[plan.key]?.[id] ?? [])].join('; ');
    rows.push({ id, label: labelOf(id), kind: kindOf(id), metrics, ...(note ? { note } : {}) });
  }
  report.summary[plan.key] = {
    key: plan.key,
    title: plan.title,
    description: plan.description,
    rows,
    unavailable,
  };
}

/**
 * Runs every selected scenario on `n` masters; `extra(urls)` runs before the masters stop. With
 * `http`, the HTTP scenario's key prefix (config.ts `HTTP_KEY_PREFIX`) is first checked on every
 * master while the libraries' restart quarantine is waited out, so that its own quarantine is
 * over by then too.
 */
export async function runTopology(
  n: number,
  opts: Options,
  extra: (urls: string[]) => Promise<void>,
  http = false,
): Promise<TopologyReport> {
  const report: TopologyReport = { masters: n, rounds: {}, summary: {}, notes: {}, footprint: [] };
  const masters = await RedisMasters.start(n);
  let libs = new Map<string, Lib>();
  const pools: Pools = {};
  const reasons = new Map<string, string>();
  let httpPrefix: Redlock | undefined;
  try {
    const clients = masters.createClients();
    await RedisMasters.ready(clients);
    // Each worker makes an unmeasured run of a library before its first measured one
    // (ProcessPool.run), also after a worker was replaced. 3 s: on 2 busy cores a library is
    // not at its pace after 300 ms (the warm-probe probe, in git history: bench/README.md
    // "Scenarios" and "Probes").
    const warmMs = opts.quick ? 120 : 3000;
    const single = opts.only.has('contended')
      ? ProcessPool.start(1, masters.urls, warmMs)
      : undefined;
    const multi = opts.only.has('multiproc')
      ? ProcessPool.start(PROCESSES, masters.urls, warmMs)
      : undefined;
    // The HTTP server's prefix: its first check starts its quarantine now, beside the others'.
    const maxTtl = maxTtlFor(opts.quick);
    httpPrefix = http
      ? new Redlock(clients, {
          keyPrefix: HTTP_KEY_PREFIX,
          ...(maxTtl === undefined ? {} : { maxTtl }),
          logger: { warn: () => undefined },
        })
      : undefined;
    libs = await buildLibs(clients, opts);
    const t0 = Date.now();
    console.error(
      `# ${n} masters: waiting until no master is in restart quarantine (our engine's default)…`,
    );
    for (const c of libs.values()) if (!isUnavailable(c)) await c.ready?.(180_000);
    if (httpPrefix) await untilTrusted(httpPrefix, 180_000);
    await httpPrefix?.close();
    console.error(`  … ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    pools.single = await single;
    pools.multi = await multi;
    await warmUp(opts, libs);

    const list = plans(opts, libs, clients, pools);
    for (const p of list) report.rounds[p.key] = Object.fromEntries(p.ids.map((id) => [id, []]));
    for (let r = 0; r < opts.rounds; r++) {
      for (const p of list) {
        // Interleave A, B, C, ... and rotate the starting library every round.
        const order = p.ids.map((_, i) => p.ids[(i + r) % p.ids.length]);
        for (const id of order) {
          const m = await p.run(id, `${p.key}:${id}:${n}:r${r}`);
          if (typeof m === 'string') {
            reasons.set(`${p.key}:${id}`, m);
            continue;
          }
          report.rounds[p.key][id].push(m);
          console.error(
            `  [${n}m r${r + 1}/${opts.rounds}] ${p.key.padEnd(16)} ${id.padEnd(18)} ` +
              Object.entries(m)
                .filter(([k]) => !k.startsWith('cmd:'))
                .map(([k, v]) => `${k}=${fmt(v, Math.abs(v) < 100 ? 2 : 0)}`)
                .join(' '),
          );
          if (p.key === 'cost') {
            const cmds = Object.entries(m)
              .filter(([k]) => k.startsWith('cmd:'))
              .map(([k, v]) => `${k.slice(4)} ${v.toFixed(1)}`);
            (report.notes.cost ??= {})[id] = [cmds.join(', ')];
          }
        }
      }
    }
    for (const p of list) summarize(report, p, reasons);

    if (opts.only.has('waiters')) {
      const ids = [
        'raw',
        'ours',
        'node-redlock',
        'sesamecare',
        'redis-semaphore',
        'redlock-universal',
      ];
      const plan = {
        key: 'waiters',
        title: `${opts.waiters.toLocaleString('en-US')} waiters, one resource, one process`,
        description: `${opts.waiters} callers of one library in one fresh child process (--expose-gc), ONE resource, each acquires once, holds ${CRITICAL_MS} ms and releases; ${opts.waitersMs} ms window, then the child reports and is killed (bounded: nothing waits for the backlog). Retry delay ${SLOW_RETRY.retryDelay} ± ${SLOW_RETRY.retryJitter} ms. "vs own 16" = grants/s ÷ the locks/s of ${WORKERS} callers of the same library looping on another resource in the same child just before (same JIT state, GC flags and loop monitor): the target. "vs 16 callers" = grants/s ÷ the same library's locks/s in the 1-process contended scenario at the same retry delay (another process, other conditions; shown for comparison). Max stall = monitorEventLoopDelay max. Heap growth after a full GC. Warnings from process.on('warning').`,
        ids,
      };
      report.rounds.waiters = Object.fromEntries(ids.map((id) => [id, []]));
      report.notes.waiters = {};
      for (let r = 0; r < opts.waiterRounds; r++) {
        for (const id of ids.map((_, i) => ids[(i + r) % ids.length])) {
          const res = await manyWaiters(
            masters.urls,
            id as ContenderId,
            SLOW_RETRY.id,
            opts.waiters,
            opts.waitersMs,
            `waiters:${id}:${n}:r${r}`,
          );
          if (res.type === 'unavailable') {
            reasons.set(`waiters:${id}`, res.reason);
            console.error(`  [${n}m w${r + 1}] waiters ${id}: ${res.reason}`);
            continue;
          }
          const { type: _t, warnings, firstError, ...nums } = res;
          // Per round, then the median over rounds (like every other metric).
          const vsBase = nums.grantsPerSec / nums.basePerSec;
          const m: Metrics = { ...nums, vsBase, warnings: warnings.length };
          report.rounds.waiters[id].push(m);
          const notes = (report.notes.waiters[id] ??= []);
          notes.push(...warnings);
          if (firstError) notes.push(`error: ${firstError}`);
          console.error(
            `  [${n}m w${r + 1}/${opts.waiterRounds}] waiters ${id.padEnd(18)} grants=${m.grants} grants/s=${m.grantsPerSec.toFixed(1)} (own 16: ${m.basePerSec.toFixed(1)}) stall=${m.maxStallMs.toFixed(0)}ms heap+=${m.heapGrowthMB.toFixed(1)}MB warnings=${warnings.length} errors=${m.errors}`,
          );
        }
      }
      summarize(report, plan, reasons);
      const base = report.summary[`contended-${SLOW_RETRY.id}`];
      for (const row of report.summary.waiters.rows) {
        const b = base?.rows.find((x) => x.id === row.id)?.metrics.locksPerSec ?? NaN;
        row.metrics.vs16 = row.metrics.grantsPerSec / b;
      }
    }
    report.footprint = await footprint(clients);
    await extra(masters.urls);
  } finally {
    await httpPrefix?.close(); // (closing twice is harmless)
    pools.single?.close();
    pools.multi?.close();
    for (const c of libs.values()) if (!isUnavailable(c)) await c.close().catch(() => undefined);
    await masters.stop();
  }
  return report;
}
