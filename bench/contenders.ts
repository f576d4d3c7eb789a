/**
 * The lock clients compared by the benchmark, behind one small interface, all configured alike:
 * same ttl, same retry delay / jitter / count where the library has them, same drift factor, and
 * the same ioredis clients (one per master, shared by every library; the scenarios run one
 * library at a time, so sharing does not make them compete).
 */
import type { Redis } from 'ioredis';
import NodeRedlock from 'redlock';
import { Redlock as SesameRedlock } from '@sesamecare-oss/redlock';
import { RedlockMutex } from 'redis-semaphore';
import { Redlock } from '../lib';
import { RawFloor } from './raw-floor';

/** Settings every library gets (where it has the knob). */
export const BENCH_SETTINGS = Object.freeze({
  /** Lock ttl in ms. */
  ttl: 10_000,
  /** Base delay between attempts on contention (ms). */
  retryDelay: 200,
  /** Random ± spread of the delay (ms). */
  retryJitter: 100,
  /** High enough that no acquire of the contended scenario gives up. */
  retryCount: 10_000,
  /** Clock drift factor. */
  driftFactor: 0.01,
});

/** A held lock, whatever the library. */
export interface Held {
  release(): Promise<void>;
}

/** Whose row it is in the tables. */
export type ContenderKind = 'ours' | 'other' | 'floor';

/** One library under test. */
export interface Contender {
  /** Short stable id (used in JSON and keys). */
  readonly id: string;
  /** Human-readable name for the tables. */
  readonly label: string;
  readonly kind: ContenderKind;
  /** Acquires `resource`, waiting (retrying) while someone else holds it. */
  lock(resource: string): Promise<Held>;
  /** Frees what the contender created (never the shared clients). */
  close(): Promise<void>;
}

/** A library that could not be run here, and why. */
export interface Unavailable {
  readonly id: string;
  readonly label: string;
  readonly kind: ContenderKind;
  readonly reason: string;
}

/** Our engine (lib/core), used directly. */
export function oursEngine(clients: Redis[], fencing: boolean): Contender {
  const engine = new Redlock(clients, {
    ttl: BENCH_SETTINGS.ttl,
    retryCount: BENCH_SETTINGS.retryCount,
    retryDelay: BENCH_SETTINGS.retryDelay,
    retryJitter: BENCH_SETTINGS.retryJitter,
    driftFactor: BENCH_SETTINGS.driftFactor,
    fencing,
    // The masters are redis-server processes the benchmark has just started, so every one of
    // them is "younger than maxTtl": with the restart quarantine on, none of their votes would
    // count for a minute (REDLOCK.md, "Crash recovery"). They hold no lock from before, so the
    // quarantine protects nothing here; it is turned off rather than waited out.
    quarantine: false,
    keyPrefix: fencing ? 'bench:ours:' : 'bench:ours-nf:',
    logger: { warn: (m) => console.warn(m) },
  });
  return {
    id: fencing ? 'ours' : 'ours-nofence',
    label: fencing ? '**nestjs-redlock** (engine)' : 'nestjs-redlock, fencing off',
    kind: 'ours',
    async lock(resource) {
      const lock = await engine.acquire(resource);
      return { release: () => lock.release().then(() => undefined) };
    },
    close: () => engine.close(),
  };
}

/** node-redlock 5.0.0-beta.2 (`redlock` on npm). */
export function nodeRedlock(clients: Redis[]): Contender {
  const redlock = new NodeRedlock(clients, {
    driftFactor: BENCH_SETTINGS.driftFactor,
    retryCount: BENCH_SETTINGS.retryCount,
    retryDelay: BENCH_SETTINGS.retryDelay,
    retryJitter: BENCH_SETTINGS.retryJitter,
  });
  redlock.on('error', () => undefined);
  return {
    id: 'node-redlock',
    label: 'redlock 5.0.0-beta.2',
    kind: 'other',
    async lock(resource) {
      const lock = await redlock.acquire([`bench:nr:${resource}`], BENCH_SETTINGS.ttl);
      return { release: () => lock.release().then(() => undefined) };
    },
    close: async () => undefined, // redlock.quit() would close the shared clients
  };
}

/** @sesamecare-oss/redlock (maintained fork of node-redlock). */
export function sesameRedlock(clients: Redis[]): Contender {
  const redlock = new SesameRedlock(clients, {
    driftFactor: BENCH_SETTINGS.driftFactor,
    retryCount: BENCH_SETTINGS.retryCount,
    retryDelay: BENCH_SETTINGS.retryDelay,
    retryJitter: BENCH_SETTINGS.retryJitter,
  });
  redlock.on('error', () => undefined);
  return {
    id: 'sesamecare',
    label: '@sesamecare-oss/redlock',
    kind: 'other',
    async lock(resource) {
      const lock = await redlock.acquire([`bench:ss:${resource}`], BENCH_SETTINGS.ttl);
      return { release: () => lock.release().then(() => undefined) };
    },
    close: async () => undefined,
  };
}

/**
 * redis-semaphore's RedlockMutex. It has a fixed `retryInterval` (no jitter; its default is
 * 10 ms) — set to the same 200 ms base delay as the others. Its background refresh timer is
 * turned off (`refreshInterval: 0`): the other clients do not auto-extend on a plain acquire
 * either.
 */
export function redisSemaphore(clients: Redis[]): Contender {
  return {
    id: 'redis-semaphore',
    label: 'redis-semaphore RedlockMutex',
    kind: 'other',
    async lock(resource) {
      const mutex = new RedlockMutex(clients, `bench:rs:${resource}`, {
        lockTimeout: BENCH_SETTINGS.ttl,
        acquireTimeout: BENCH_SETTINGS.retryCount * BENCH_SETTINGS.retryDelay,
        acquireAttemptsLimit: BENCH_SETTINGS.retryCount + 1,
        retryInterval: BENCH_SETTINGS.retryDelay,
        refreshInterval: 0,
      });
      await mutex.acquire();
      return { release: () => mutex.release() };
    },
    close: async () => undefined,
  };
}

/**
 * redlock-universal. It declares `engines: node >= 22`; its CommonJS build is loaded here on
 * whatever Node runs the benchmark, and a probe lock decides whether it works. It has
 * `retryAttempts` / `retryDelay` but no jitter. One lock object per key is its API.
 */
export async function redlockUniversal(clients: Redis[]): Promise<Contender | Unavailable> {
  const id = 'redlock-universal';
  const label = 'redlock-universal';
  const major = Number(process.versions.node.split('.')[0]);
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const ru = require('redlock-universal') as typeof import('redlock-universal');
    const adapters = clients.map((c) => new ru.IoredisAdapter(c));
    const make = (resource: string): ReturnType<typeof ru.createRedlock> =>
      ru.createRedlock({
        adapters,
        key: `bench:ru:${resource}`,
        ttl: BENCH_SETTINGS.ttl,
        retryAttempts: BENCH_SETTINGS.retryCount,
        retryDelay: BENCH_SETTINGS.retryDelay,
        clockDriftFactor: BENCH_SETTINGS.driftFactor,
      });
    const probe = make('probe');
    await probe.release(await probe.acquire());
    return {
      id,
      label,
      kind: 'other',
      async lock(resource) {
        const lock = make(resource);
        const handle = await lock.acquire();
        return { release: () => lock.release(handle).then(() => undefined) };
      },
      close: async () => undefined,
    };
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    return {
      id,
      label,
      kind: 'other',
      reason:
        major < 22
          ? `n/a (requires Node 22; on Node ${process.versions.node}: ${why})`
          : `n/a (${why})`,
    };
  }
}

/** The raw floor (see raw-floor.ts). */
export async function rawFloor(clients: Redis[]): Promise<Contender> {
  const raw = new RawFloor(clients, BENCH_SETTINGS.ttl, BENCH_SETTINGS);
  await raw.init();
  return {
    id: 'raw',
    label: 'raw floor (SET NX PX + Lua DEL)',
    kind: 'floor',
    async lock(resource) {
      const key = `bench:raw:${resource}`;
      const token = await raw.lock(key);
      return { release: () => raw.unlock(key, token) };
    },
    close: async () => undefined,
  };
}

/** Whether a value is an {@link Unavailable} marker. */
export function isUnavailable(c: Contender | Unavailable): c is Unavailable {
  return 'reason' in c;
}
