/**
 * Child process of the multi-process contended scenario (bench/multiproc.ts). Connects to the
 * masters in BENCH_REDIS_URLS with its own clients, builds contenders on demand, and on each
 * `run` message starts `callers` workers on one resource at the agreed wall-clock instant. Each
 * worker acquires, holds the lock `criticalMs`, releases, and asks again until the window ends.
 * Reports every wait and every holding interval (absolute time, so that the parent can check
 * across processes that no two holders overlapped). Callers still waiting `graceMs` after the
 * window are abandoned (counted with their wait so far) and the worker exits, so that a library
 * that starves its callers cannot stretch the run or disturb the next one. Exits when the parent
 * goes away.
 */
import type { Redis } from 'ioredis';
import { benchClients, urlsFromEnv } from './clients';
import { absNow, quickFromEnv, retryProfile } from './config';
import { Contender, ContenderId, isUnavailable, makeContender } from './contenders';
import { sleep } from './stats';

/** What the parent asks for. */
export interface RunRequest {
  type: 'run';
  lib: ContenderId;
  profile: string;
  resource: string;
  startAt: number;
  windowMs: number;
  callers: number;
  criticalMs: number;
  /** How long after the window callers still waiting are given before they are abandoned. */
  graceMs: number;
}

/** What a worker answers. */
export type RunReply =
  | {
      type: 'result';
      locks: number;
      /** Every wait; a caller abandoned after the grace period counts with its wait so far. */
      waits: number[];
      intervals: number[];
      errors: string[];
      /** Callers still waiting at the end of the grace period (the worker is then replaced). */
      unfinished: number;
    }
  | { type: 'unavailable'; reason: string };

const cache = new Map<string, Contender | string>();

async function contender(
  clients: Redis[],
  lib: ContenderId,
  profile: string,
): Promise<Contender | string> {
  const key = `${lib}:${profile}`;
  let c = cache.get(key);
  if (c === undefined) {
    const made = await makeContender(lib, clients, retryProfile(profile), quickFromEnv());
    if (isUnavailable(made)) c = made.reason;
    else {
      await made.ready?.(120_000);
      c = made;
    }
    cache.set(key, c);
  }
  return c;
}

async function run(clients: Redis[], req: RunRequest): Promise<RunReply> {
  const c = await contender(clients, req.lib, req.profile);
  if (typeof c === 'string') return { type: 'unavailable', reason: c };
  const waits: number[] = [];
  const intervals: number[] = [];
  const errors: string[] = [];
  let locks = 0;
  await sleep(Math.max(0, req.startAt - absNow()));
  const end = req.startAt + req.windowMs;
  const waitingSince: (number | undefined)[] = [];
  const caller = async (i: number): Promise<void> => {
    while (absNow() < end) {
      const t0 = absNow();
      waitingSince[i] = t0;
      let held;
      try {
        held = await c.lock(req.resource);
      } catch (err) {
        errors.push(err instanceof Error ? err.message : String(err));
        return;
      }
      const t1 = absNow();
      waitingSince[i] = undefined;
      waits.push(t1 - t0);
      if (t1 <= end) locks++;
      await sleep(req.criticalMs);
      intervals.push(t1, absNow());
      await held.release().catch((err: unknown) => errors.push(String(err)));
    }
  };
  const all = Promise.all(Array.from({ length: req.callers }, (_, i) => caller(i)));
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    all,
    new Promise((r) => (timer = setTimeout(r, end + req.graceMs - absNow()))),
  ]);
  clearTimeout(timer);
  const now = absNow();
  let unfinished = 0;
  for (const t0 of waitingSince) {
    if (t0 === undefined) continue;
    unfinished++;
    waits.push(now - t0);
  }
  return { type: 'result', locks, waits, intervals, errors, unfinished };
}

async function main(): Promise<void> {
  const clients = await benchClients(urlsFromEnv());
  process.on('disconnect', () => process.exit(0));
  process.on('message', (m: RunRequest) => {
    if (m?.type !== 'run') return;
    run(clients, m).then(
      (reply) =>
        // Abandoned callers would go on competing during the next run: leave instead (the
        // parent starts a fresh worker).
        process.send?.(reply, () => {
          if (reply.type === 'result' && reply.unfinished > 0) process.exit(0);
        }),
      (err: unknown) =>
        process.send?.({ type: 'unavailable', reason: `worker error: ${String(err)}` }),
    );
  });
  process.send?.({ type: 'ready' });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
