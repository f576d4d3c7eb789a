/**
 * Multi-process contended scenario: `processes` child processes (bench/multiproc-worker.ts), each
 * with its own ioredis clients and its own instance of the library, run `callers` workers each on
 * ONE resource, started at the same wall-clock instant. The workers stay up for the whole run and
 * serve every library and round in turn; they exit with the runner.
 */
import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { absNow } from './config';
import type { ContenderId } from './contenders';
import type { RunReply, RunRequest } from './multiproc-worker';
import { ContendedResult, waitStats } from './scenarios';

/** Result of one multi-process run. */
export interface MultiProcResult extends ContendedResult {
  /** Holding intervals of two holders that overlap by more than 0.1 ms (must be 0). */
  overlaps: number;
  /** Acquire or release errors (acquires never give up in this scenario: should be 0). */
  errors: number;
  /** Callers still waiting at the end of the grace period (their wait so far is counted). */
  unfinished: number;
}

/** Forks a bench child with ts-node (transpile only), IPC, and the masters' URLs. */
export function forkBench(
  file: string,
  urls: readonly string[],
  env: Record<string, string> = {},
  execArgv: string[] = [],
): ChildProcess {
  return fork(join(__dirname, file), [], {
    execArgv: ['-r', 'ts-node/register/transpile-only', ...execArgv],
    env: { ...process.env, BENCH_REDIS_URLS: urls.join(','), ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

/** The next IPC message of `child` that passes `accept`, or a rejection after `timeoutMs`. */
export function nextMessage<T>(
  child: ChildProcess,
  timeoutMs: number,
  accept: (m: unknown) => boolean = () => true,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: unknown): void => {
      if (!accept(m)) return;
      cleanup();
      resolve(m as T);
    };
    const onExit = (code: number | null, signal: string | null): void => {
      cleanup();
      reject(new Error(`child exited (${signal ?? code}) before answering`));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`child did not answer within ${timeoutMs} ms`));
    }, timeoutMs);
    const cleanup = (): void => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

/** The worker processes of the multi-process scenario. */
export class ProcessPool {
  /** Per worker, the `lib:profile` runs it made (a replaced worker starts with none). */
  private readonly ran: Set<string>[];
  /** `lib:profile` runs whose last run abandoned callers: warming them up cannot help. */
  private readonly abandoning = new Set<string>();

  private constructor(
    private readonly children: ChildProcess[],
    private readonly urls: readonly string[],
    private readonly warmMs: number,
  ) {
    this.ran = children.map(() => new Set());
  }

  private static async spawn(urls: readonly string[]): Promise<ChildProcess> {
    const child = forkBench('multiproc-worker.ts', urls);
    try {
      await nextMessage(child, 120_000, (m) => (m as { type?: string }).type === 'ready');
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
    return child;
  }

  /**
   * Forks `n` workers connected to `urls` and waits until each is ready. `warmMs`: the length
   * of the unmeasured run that comes first where a worker has not run the library yet.
   */
  static async start(n: number, urls: readonly string[], warmMs = 300): Promise<ProcessPool> {
    const children = await Promise.all(Array.from({ length: n }, () => ProcessPool.spawn(urls)));
    return new ProcessPool(children, urls, warmMs);
  }

  /**
   * One run of `lib` on `resource` in every worker. Resolves with the merged result, or with
   * the reason the library is not available. A worker that has not run `lib` with `profile`
   * yet — every worker at first, and the fresh one that replaces a worker whose callers were
   * abandoned — first makes an unmeasured run of `warmMs` on another resource, so that no
   * library's measured window holds its set-up in a fresh process (building its instance and
   * connections, compiling its code paths) while the others' do not: the rounds' order decides
   * which library runs right after a replacement.
   */
  async run(
    lib: ContenderId,
    profile: string,
    resource: string,
    windowMs: number,
    callers: number,
    criticalMs: number,
    graceMs: number,
  ): Promise<MultiProcResult | string> {
    const run = { lib, profile, resource, windowMs, callers, criticalMs, graceMs };
    const key = `${lib}:${profile}`;
    if (!this.abandoning.has(key) && !this.ran.every((done) => done.has(key))) {
      const warm = await this.once({ ...run, resource: `${resource}:warm`, windowMs: this.warmMs });
      if (typeof warm === 'string') return warm;
    }
    return this.once(run);
  }

  private async once(run: Omit<RunRequest, 'type' | 'startAt'>): Promise<MultiProcResult | string> {
    const { lib, profile, windowMs, graceMs } = run;
    const req: RunRequest = { type: 'run', ...run, startAt: absNow() + 300 };
    const replies = await Promise.all(
      this.children.map((c) => {
        const reply = nextMessage<RunReply>(c, windowMs + graceMs + 120_000, (m) => {
          const t = (m as RunReply).type;
          return t === 'result' || t === 'unavailable';
        });
        c.send(req);
        return reply;
      }),
    );
    const waits: number[] = [];
    const spans: [number, number][] = [];
    let locks = 0;
    let errors = 0;
    let unfinished = 0;
    // A worker that abandoned callers exits by itself: replace it before the next run.
    for (const [i, r] of replies.entries()) {
      if (r.type !== 'result' || r.unfinished === 0) continue;
      const old = this.children[i];
      if (old.exitCode === null && old.signalCode === null) {
        const gone = new Promise((res) => old.once('exit', res));
        setTimeout(() => old.kill('SIGKILL'), 5000).unref();
        await gone;
      }
      this.children[i] = await ProcessPool.spawn(this.urls);
      this.ran[i] = new Set();
    }
    const key = `${lib}:${profile}`;
    for (const [i, r] of replies.entries()) {
      if (r.type === 'result' && r.unfinished === 0) this.ran[i].add(key);
    }
    if (replies.some((r) => r.type === 'result' && r.unfinished > 0)) this.abandoning.add(key);
    else this.abandoning.delete(key);
    for (const r of replies) {
      if (r.type === 'unavailable') return r.reason;
      unfinished += r.unfinished;
      waits.push(...r.waits);
      locks += r.locks;
      errors += r.errors.length;
      for (let i = 0; i < r.intervals.length; i += 2)
        spans.push([r.intervals[i], r.intervals[i + 1]]);
    }
    spans.sort((a, b) => a[0] - b[0]);
    let overlaps = 0;
    let lastEnd = -Infinity;
    for (const [start, end] of spans) {
      if (start < lastEnd - 0.1) overlaps++;
      lastEnd = Math.max(lastEnd, end);
    }
    return {
      locks,
      locksPerSec: (locks / windowMs) * 1000,
      ...waitStats(waits),
      overlaps,
      errors,
      unfinished,
    };
  }

  /** Ends every worker (they also exit by themselves when the runner goes away). */
  close(): void {
    for (const c of this.children)
      if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }
}
