/**
 * (5) HTTP: a Nest Express app (bench/http-server.ts, in a child process so that the load
 * generator does not share its event loop) under autocannon load, endpoint without and with
 * `@Locked`, interleaved over rounds. Local only: 127.0.0.1, bounded in time.
 */
import { ChildProcess, fork } from 'node:child_process';
import autocannon from 'autocannon';
import { repoPath } from '../test/harness/paths';
import type { Unavailable } from './report';
import { median } from './stats';

/** One endpoint's medians over rounds. */
export interface HttpRow {
  id: string;
  label: string;
  reqPerSec: number;
  p50: number;
  p99: number;
  non2xx: number;
  /** Responses per status code other than 2xx, summed over rounds (e.g. 503 = no quorum). */
  codes: Record<string, number>;
  errors: number;
}

/** Result of the HTTP scenario. */
export interface HttpResult {
  masters: number;
  connections: number;
  seconds: number;
  rounds: number;
  note: string;
  rows: HttpRow[];
  perRound: Record<string, Omit<HttpRow, 'id' | 'label'>[]>;
  unavailable: Unavailable[];
}

const CONNECTIONS = 32;

const ENDPOINTS = [
  { id: 'plain', label: 'GET /plain/:id (no lock)', path: '/plain/' },
  {
    id: 'locked',
    label: "GET /locked/:id with `@Locked('bench:http:{params.id}')`",
    path: '/locked/',
  },
] as const;

function startServer(urls: string[]): Promise<{ child: ChildProcess; port: number }> {
  return new Promise((resolve, reject) => {
    // (repoPath, not __dirname: test/core/bench-http.spec.ts runs this as an ES module.)
    const child = fork(repoPath('bench', 'http-server.ts'), [], {
      // BENCH_CPU_PROF_DIR=dir: the server writes a V8 CPU profile there when it stops.
      execArgv: [
        '-r',
        'ts-node/register/transpile-only',
        ...(process.env.BENCH_CPU_PROF_DIR
          ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF_DIR}`]
          : []),
      ],
      env: { ...process.env, BENCH_REDIS_URLS: urls.join(',') },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('HTTP bench server was not ready within 240 s'));
    }, 240_000);
    child.once('message', (m: { port?: number }) => {
      clearTimeout(timer);
      if (typeof m?.port === 'number') resolve({ child, port: m.port });
      else reject(new Error('HTTP bench server sent no port'));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`HTTP bench server exited with ${code}`));
    });
  });
}

async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.send('stop');
  const timer = setTimeout(() => child.kill('SIGKILL'), 12_000);
  await exited;
  clearTimeout(timer);
}

let nextId = 0;

async function load(port: number, path: string, seconds: number): Promise<autocannon.Result> {
  return autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'GET',
        // A new resource id for every request: nothing contends, every request locks.
        setupRequest: (req) => ({ ...req, path: `${path}${++nextId}` }),
      },
    ],
  });
}

/**
 * Runs the HTTP scenario on the given masters: `rounds` × (plain, locked), `seconds` each, after a
 * warm-up, once the server found none of them in restart quarantine for its key prefix (the
 * runner checks that prefix early, runTopology's `http`, so that the server's wait is short).
 */
export async function runHttp(
  urls: string[],
  seconds: number,
  rounds: number,
): Promise<HttpResult> {
  let child: ChildProcess | undefined;
  const perRound: HttpResult['perRound'] = {};
  try {
    const server = await startServer(urls);
    child = server.child;
    for (const e of ENDPOINTS) await load(server.port, e.path, 1); // warm-up, not measured
    for (const e of ENDPOINTS) perRound[e.id] = [];
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 ? [...ENDPOINTS].reverse() : ENDPOINTS;
      for (const e of order) {
        const res = await load(server.port, e.path, seconds);
        const row = {
          reqPerSec: res.requests.average,
          p50: res.latency.p50,
          p99: res.latency.p99,
          non2xx: res.non2xx,
          codes: Object.fromEntries(
            Object.entries(res.statusCodeStats ?? {})
              .filter(([code]) => !code.startsWith('2'))
              .map(([code, v]) => [code, v.count ?? 0]),
          ),
          errors: res.errors + res.timeouts,
        };
        perRound[e.id].push(row);
        console.error(
          `  [http r${r + 1}/${rounds}] ${e.id.padEnd(7)} req/s=${row.reqPerSec.toFixed(0)} p50=${row.p50} p99=${row.p99} non2xx=${row.non2xx} errors=${row.errors}`,
        );
      }
    }
  } finally {
    if (child) await stopServer(child);
  }
  const rows = ENDPOINTS.map((e) => {
    const list = perRound[e.id];
    return {
      id: e.id,
      label: e.label,
      reqPerSec: median(list.map((x) => x.reqPerSec)),
      p50: median(list.map((x) => x.p50)),
      p99: median(list.map((x) => x.p99)),
      non2xx: list.reduce((a, x) => a + x.non2xx, 0),
      codes: list.reduce<Record<string, number>>((acc, x) => {
        for (const [code, n] of Object.entries(x.codes)) acc[code] = (acc[code] ?? 0) + n;
        return acc;
      }, {}),
      errors: list.reduce((a, x) => a + x.errors, 0),
    };
  });
  return {
    masters: urls.length,
    connections: CONNECTIONS,
    seconds,
    rounds,
    note: 'Server: Nest 11 + Express in its own process; load: autocannon in the bench process; latencies in whole ms as autocannon reports them.',
    rows,
    perRound,
    unavailable: [],
  };
}
