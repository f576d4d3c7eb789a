/**
 * The markdown report: run settings, then per topology one section per scenario (library table,
 * targets), the per-operation cost breakdown, the keyspace footprint and a summary of targets.
 */
import { BENCH_SETTINGS, RETRY_PROFILES, maxTtlFor } from './config';
import { Column, Target, footprintTable, libraryTable, targetTable } from './report';
import type { Options } from './options';
import { targetsByScenario } from './targets';
import { CRITICAL_MS, PARALLEL, TopologyReport } from './topology';

/** The header: machine, mode and every setting the libraries ran with. */
export function describeRun(
  meta: {
    date: string;
    cpu: string;
    memoryGiB: number;
    platform: string;
    node: string;
    redis: string;
    loadAverageAtStart: number[];
  },
  opts: Options,
  loadAtEnd: number[],
  durationSec: number,
): string[] {
  const maxTtl = maxTtlFor(opts.quick);
  const q = Math.max(1000, Math.ceil((maxTtl ?? 60_000) * (1 + BENCH_SETTINGS.driftFactor)) + 2);
  return [
    opts.quick
      ? '> **QUICK MODE** (smoke test: short windows, few rounds). Not representative; do not publish these numbers.'
      : `Full run: ${opts.rounds} rounds.`,
    '',
    `Measured ${meta.date.slice(0, 10)} on ${meta.cpu} (${meta.memoryGiB} GiB), ${meta.platform}, Node ${meta.node}, redis-server ${meta.redis}; load average ${meta.loadAverageAtStart[0]} at start, ${loadAtEnd[0]} at end; ${Math.round(durationSec)} s wall.`,
    '',
    '**Settings** (the same for every library that has the knob):',
    '',
    `- masters: ${opts.masters.join(', ')} local \`redis-server\` processes on 127.0.0.1, started and stopped by the benchmark; one shared ioredis client per master in the runner (no offline queue, no per-request retries), own clients of the same kind in each child process.`,
    `- ttl ${BENCH_SETTINGS.ttl} ms, drift factor ${BENCH_SETTINGS.driftFactor}, ${BENCH_SETTINGS.retryCount} retries (no acquire gives up inside a window).`,
    `- retry profiles: ${RETRY_PROFILES.map((p) => `${p.id} = ${p.retryDelay} ± ${p.retryJitter} ms`).join(', ')}. Uncontended, ${PARALLEL} parallel, cost, waiters and HTTP use 200 ms (retries do not happen there, except waiters). redis-semaphore has a fixed \`retryInterval\` (no jitter) and runs with \`refreshInterval: 0\`; redlock-universal has no jitter.`,
    `- critical section in the contended scenarios: ${CRITICAL_MS} ms (a timer).`,
    `- **nestjs-redlock: full safety defaults**: fencing tokens on, restart quarantine on (default ${q} ms: the run first waits until every master is out of it)${maxTtl === undefined ? ', maxTtl default (60 s)' : `, maxTtl ${maxTtl} ms (quick mode only, to shorten that wait; per-lock work is the same)`}, wake-ups on release (handoff) on, clock check on, per-node timeout default (50 ms). The rows "fencing off", "restart quarantine off", "wake-ups off (handoff: false)" and "clock check off" (what reading each master's clock with every vote costs) each turn off one of these and keep the rest (uncontended and cost; fencing and clock check off also in ${PARALLEL} parallel), "all four off" turns them all off (our engine's own work with scripts no heavier than node-redlock's; uncontended and cost); "fairness: 'across-processes'" and "on node-redis clients" change the mode and the clients.`,
    `- rounds: ${opts.rounds} (many-waiters: ${opts.waiterRounds}); libraries interleaved, starting library rotated every round; tables show medians over rounds. Windows per library per round: uncontended ${opts.seqMs} ms, parallel ${opts.parMs} ms, 1-process contended ${opts.contMs} ms, multi-process ${opts.multiMs} ms, waiters ${opts.waitersMs} ms; cost ${opts.costOps} ops.`,
    '- "vs best other" divides by the best library that is neither ours nor the raw floor (highest throughput, lowest wait); "vs raw floor" by the raw floor (parallel `SET NX PX` + compare-and-delete, no extras: not a safe client).',
  ];
}

const THROUGHPUT: Column[] = [
  { head: 'ops/s', metric: 'opsPerSec', compare: 'higher' },
  { head: 'p50 ms', metric: 'p50', digits: 2 },
  { head: 'p99 ms', metric: 'p99', digits: 2 },
  { head: 'Node CPU µs/op', metric: 'cpuUsPerOp' },
  { head: 'Redis CPU µs/op', metric: 'redisCpuUsPerOp' },
];
const CONTENDED: Column[] = [
  { head: 'locks/s', metric: 'locksPerSec', compare: 'higher' },
  { head: 'wait p50 ms', metric: 'waitP50', digits: 1 },
  { head: 'wait p99 ms', metric: 'waitP99', digits: 1, compare: 'lower' },
  { head: 'wait max ms', metric: 'waitMax', digits: 1 },
  { head: 'max ÷ mean', metric: 'maxOverMean', digits: 1 },
  { head: 'unfinished', metric: 'unfinished' },
];
const MULTI: Column[] = [
  ...CONTENDED,
  { head: 'overlaps', metric: 'overlaps' },
  { head: 'errors', metric: 'errors' },
];
const WAITERS: Column[] = [
  { head: 'grants', metric: 'grants' },
  { head: 'grants/s', metric: 'grantsPerSec', digits: 1, compare: 'higher' },
  { head: 'vs own 16', metric: 'vsBase', digits: 2 },
  { head: 'vs 16 callers', metric: 'vs16', digits: 2 },
  { head: 'max stall ms', metric: 'maxStallMs' },
  { head: 'heap growth MB', metric: 'heapGrowthMB', digits: 1 },
  { head: 'B/waiter', metric: 'bytesPerWaiter' },
  { head: 'warnings', metric: 'warnings' },
  { head: 'errors', metric: 'errors' },
];
const COST: Column[] = [
  { head: 'Node µs/op (1 caller)', metric: 'nodeUsSeq', compare: 'lower' },
  { head: `Node µs/op (${PARALLEL})`, metric: 'nodeUsPar' },
  { head: 'Redis µs/op (1 caller)', metric: 'redisUsSeq', digits: 1, compare: 'lower' },
  { head: `Redis µs/op (${PARALLEL})`, metric: 'redisUsPar', digits: 1 },
  { head: 'commands/op', metric: 'callsSeq', digits: 1 },
  { head: 'keys left / resource / master', metric: 'keysPerResource', digits: 2 },
  { head: 'bytes left / resource / master', metric: 'bytesPerResource' },
  { head: 'TTL left s', metric: 'leftTtlSec' },
];

function columnsFor(key: string): { columns: Column[]; note: boolean } {
  if (key === 'uncontended' || key === 'uncontended-reused' || key === 'parallel')
    return { columns: THROUGHPUT, note: false };
  if (key.startsWith('contended')) return { columns: CONTENDED, note: false };
  if (key.startsWith('multiproc')) return { columns: MULTI, note: false };
  if (key === 'waiters') return { columns: WAITERS, note: true };
  return { columns: COST, note: true };
}

/** One topology's sections. */
export function renderTopology(rep: TopologyReport, opts: Options, all: Target[]): string[] {
  const out: string[] = [];
  const targets = targetsByScenario(rep);
  let i = 0;
  for (const [key, sum] of Object.entries(rep.summary)) {
    const { columns, note } = columnsFor(key);
    out.push('', `### ${rep.masters} masters — (${++i}) ${sum.title}`, '', sum.description, '');
    out.push(...libraryTable(sum, columns, note));
    if (targets[key]?.length) out.push('', ...targetTable(targets[key]));
  }
  if (rep.footprint.length) {
    out.push('', `### ${rep.masters} masters — keys left on the masters at the end of the run`, '');
    out.push(
      'SCAN of every master after all scenarios (lock keys expire within the ttl; fencing counters live `fencingKeyTtl`, default 1 hour):',
      '',
      ...footprintTable(rep.footprint),
    );
  }
  if (all.length)
    out.push(
      '',
      `### ${rep.masters} masters — targets (reported, never asserted)`,
      '',
      ...targetTable(all, true),
    );
  void opts;
  return out;
}
