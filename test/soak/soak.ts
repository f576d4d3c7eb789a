/**
 * Stability soak: one engine on 3 local masters runs churn (many resources acquired,
 * extended, released, some left to expire), contention (`waiters` loops on a few resources) and
 * faults (a master paused with SIGSTOP/SIGCONT, or killed and restarted empty) for `durationMs`,
 * then stops everything, lets every lock expire and checks that nothing was left behind: heap,
 * lock keys on the masters, the engine's internal tables, process warnings, unhandled rejections.
 * Throughput is not measured here (the performance issue owns it); only stability is.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Redis } from 'ioredis';
import { RedisMasters } from '../harness/redis-masters';
import { Redlock } from '../../lib/core/redlock';
import type { KeyCounts, Sample, SoakResult } from './report';
import { heapTrend, keyTrends, verdict } from './report';

export { formatSoak } from './report';
export type { SoakResult } from './report';

export interface SoakOptions {
  readonly durationMs: number;
  readonly waiters: number;
  readonly log?: (line: string) => void;
}

const PREFIX = 'soak:';
const CHURN = Array.from({ length: 200 }, (_, i) => `churn:${i}`);
const HOT = ['hot:0', 'hot:1', 'hot:2', 'hot:3'];
const CHURN_LOOPS = 16;
const MAX_TTL = 3000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const pick = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)];

/** `global.gc` when run with --expose-gc, else the same function exposed at run time. */
function collector(): () => void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g) return g;
  setFlagsFromString('--expose_gc');
  return runInNewContext('gc') as () => void;
}

/**
 * The keys on one master by kind, from a SCAN of the whole keyspace (SCAN skips keys that have
 * expired; DBSIZE still counts them until Redis reclaims them).
 */
async function keysOf(c: Redis): Promise<KeyCounts> {
  const keys = { dbsize: -1, locks: -1, fences: -1, marks: -1, markers: -1, foreign: -1 };
  try {
    keys.dbsize = await c.dbsize();
    [keys.locks, keys.fences, keys.marks, keys.markers, keys.foreign] = [0, 0, 0, 0, 0];
    let cursor = '0';
    do {
      const [next, batch] = await c.scan(cursor, 'COUNT', 1000);
      for (const k of batch) {
        if (k.startsWith(`${PREFIX}fence:`)) keys.fences++;
        else if (k.startsWith(`${PREFIX}poll:`) || k.startsWith(`${PREFIX}wait:`)) keys.marks++;
        else if (k.startsWith(`${PREFIX}{`)) keys.locks++;
        else if (k === `${PREFIX}boot` || k === `${PREFIX}boot:run`) keys.markers++;
        else keys.foreign++;
      }
      cursor = next;
    } while (cursor !== '0');
  } catch {
    // Down (a fault): -1 everywhere.
  }
  return keys;
}

export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const log = options.log ?? (() => undefined);
  const gc = collector();
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(`warning ${w.name}: ${w.message}`);
  const onRejection = (r: unknown): void => void warnings.push(`unhandled rejection: ${String(r)}`);
  process.on('warning', onWarning);
  process.on('unhandledRejection', onRejection);

  const counts: Record<string, number> = {};
  const count = (what: string): void => void (counts[what] = (counts[what] ?? 0) + 1);
  const failed = (what: string) => (err: unknown) =>
    count(`${what} ${err instanceof Error ? err.name : 'non-error'}`);

  const masters = await RedisMasters.start(3);
  const started = Date.now();
  const samples: Sample[] = [];
  let engine: Redlock | undefined;
  try {
    const clients = masters.createClients();
    const probes = masters.createClients({ retryStrategy: () => 200 });
    await RedisMasters.ready([...clients, ...probes]);
    const rl = (engine = new Redlock(clients, {
      keyPrefix: PREFIX,
      ttl: 1000,
      maxTtl: MAX_TTL,
      requestTimeout: 200,
      retryDelay: 200,
      retryJitter: 100,
      // Masters going down and coming back are expected here: counted, not printed.
      logger: { warn: () => count('engine log warn'), debug: () => undefined },
    }));
    const stop = new AbortController();
    const { signal } = stop;
    const live = (): boolean => !signal.aborted;
    /** Sleeps `ms`, or until the run stops. */
    const idle = (ms: number): Promise<unknown> => delay(ms, undefined, { signal }).catch(() => 0);

    const sample = async (): Promise<Sample> => {
      gc();
      const keys = await Promise.all(probes.map(keysOf));
      const heapMb = process.memoryUsage().heapUsed / 2 ** 20;
      return { t: Date.now() - started, heapMb, footprint: rl.footprint, keys };
    };

    // Churn: short locks on 200 resources, every way a lock can end.
    const churn = async (): Promise<void> => {
      while (live()) {
        const r = pick(CHURN);
        const mode = Math.floor(Math.random() * 5);
        const opts = { ttl: 300 + Math.floor(Math.random() * 700), retryCount: 3, signal };
        try {
          if (mode === 0) await (await rl.acquire([r, pick(CHURN)], opts)).release();
          else if (mode === 1) {
            const lock = await rl.acquire(r, opts);
            await lock.extend(1000);
            await lock.release();
          } else if (mode === 2) await rl.using(r, () => sleep(Math.random() * 1500), opts);
          else if (mode === 3)
            await rl.acquire(r, opts); // left to expire
          else await (await rl.tryAcquire(r, { ttl: opts.ttl }))?.release();
          count(`churn ok`);
        } catch (err) {
          failed('churn')(err);
        }
        await sleep(5 + Math.random() * 20);
      }
    };

    // Contention: every waiter loops on one of a few resources with a generous wait.
    const waiter = async (i: number): Promise<void> => {
      const opts = {
        ...{ ttl: 1000, retryCount: 1_000_000, retryDelay: 1000, retryJitter: 500 },
        ...{ waitTimeout: 60_000, signal },
      };
      while (live()) {
        try {
          const lock = await rl.acquire(HOT[i % HOT.length], opts);
          await sleep(Math.random() * 5);
          await lock.release();
          count('waiter ok');
          granted[i] = true;
        } catch (err) {
          failed('waiter')(err);
          if (live()) await sleep(100);
        }
      }
    };

    // Faults, one master at a time, alternating pause and kill-restart-empty.
    const faults = async (): Promise<void> => {
      const every = Math.min(30_000, Math.max(6_000, options.durationMs / 8));
      for (let n = 0; ; n++) {
        await idle(every);
        if (!live()) return;
        const m = pick(masters.masters);
        if (n % 2 === 0) {
          m.pause();
          await sleep(1500);
          m.resume();
          count('fault pause');
        } else {
          await m.kill();
          await sleep(1000);
          await m.start();
          count('fault kill+restart-empty');
        }
      }
    };

    const sampler = async (): Promise<void> => {
      const every = Math.min(10_000, Math.max(1000, options.durationMs / 60));
      while (live()) {
        samples.push(await sample());
        const s = samples[samples.length - 1];
        log(
          `${(s.t / 1000).toFixed(0).padStart(4)} s  heap ${s.heapMb.toFixed(1)} MB  ` +
            `footprint ${JSON.stringify(s.footprint)}  lock keys ${s.keys.map((k) => k.locks)}  ` +
            `grants ${(counts['churn ok'] ?? 0) + (counts['waiter ok'] ?? 0)}`,
        );
        await idle(every);
      }
    };

    const granted: boolean[] = Array.from({ length: options.waiters }, () => false);
    const loadStart = Date.now();
    const loops = [
      ...Array.from({ length: CHURN_LOOPS }, churn),
      ...Array.from({ length: options.waiters }, (_, i) => waiter(i)),
      faults(),
      sampler(),
    ];
    await sleep(options.durationMs);
    stop.abort();
    const loadMs = Date.now() - loadStart;
    log('stopping: waiting for every loop to end and every lock to expire');
    await Promise.all(loops);
    // Every lock is released or left to expire by now: wait until the keys and tables are gone.
    const deadline = Date.now() + MAX_TTL * 2 + 5000;
    let final = await sample();
    const clean = (s: Sample): boolean =>
      s.keys.every((k) => k.locks === 0 && k.dbsize === k.fences + k.markers) &&
      Object.values(s.footprint).every((v) => v === 0);
    while (!clean(final) && Date.now() < deadline) {
      await sleep(250);
      final = await sample();
    }
    const run = {
      requestedMs: options.durationMs,
      loadMs,
      waiters: options.waiters,
      waitersGranted: granted.filter(Boolean).length,
      resources: CHURN.length + HOT.length,
    };
    const heap = heapTrend(samples);
    const result = { run, samples, final, counts, heap, keys: keyTrends(samples), warnings };
    return { ...result, failures: verdict(result) };
  } finally {
    await engine?.close();
    await masters.stop();
    process.off('warning', onWarning);
    process.off('unhandledRejection', onRejection);
  }
}
