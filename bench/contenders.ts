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
import { createClient } from 'redis';
import { Redlock } from '../lib/core';
import type { RedlockClient, ReleaseOptions } from '../lib/core';
import { BENCH_SETTINGS, RetryProfile, maxTtlFor, untilTrusted } from './config';
import { GuardedFloor } from './guarded-floor';
import { RawFloor } from './raw-floor';
import type { ContenderKind, Unavailable } from './report';

export type { Unavailable } from './report';

export { BENCH_SETTINGS } from './config';

/** A held lock, whatever the library. */
export interface Held {
  release(): Promise<void>;
}

export type { ContenderKind } from './report';

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
  /** Resolves once the contender can lock (ours: no master left in restart quarantine). */
  ready?(deadlineMs: number): Promise<void>;
}

let quarantineNoted = false;

/** Our engine's warnings, to stderr; the restart-quarantine notice (waited out) only once. */
function benchWarn(message: string): void {
  if (message.includes('restart quarantine')) {
    if (quarantineNoted) return;
    quarantineNoted = true;
  }
  console.error(`  [nestjs-redlock warning] ${message}`);
}

/**
 * Which of our rows: the defaults; one guarantee turned off, the rest default (what each costs):
 * fencing off (`fencing: false`), the restart quarantine off (`quarantine: false`), wake-ups on
 * release off (`handoff: false`: waiters poll), the clock check off (`clockCheck: false`: what
 * reading each master's clock with every vote costs); all four of them off at once (`ours-bare`:
 * our engine's own work beside node-redlock's and the raw floor's, with scripts that do no more
 * than theirs); `fairness: 'across-processes'`; the defaults with releases that resolve at a
 * quorum (`release({ wait: 'quorum' })`, as node-redlock's and the floors' do; the default waits
 * for every master's answer); or the defaults over node-redis clients (`redis` 6, RESP3, one
 * client per master, made for the row).
 */
export type OursVariant =
  | 'ours'
  | 'ours-nofence'
  | 'ours-noquarantine'
  | 'ours-nohandoff'
  | 'ours-noclock'
  | 'ours-bare'
  | 'ours-fair'
  | 'ours-quorumrelease'
  | 'ours-node-redis';

/**
 * Our engine (lib/core), used directly, with its full safety defaults: fencing tokens, the restart
 * quarantine (see {@link maxTtlFor} for how the benchmark waits it out), wake-ups on release
 * (`handoff`) and the clock check on, except the one that the variant's row turns off; the
 * "fair" row with `fairness: 'across-processes'`.
 */
export function oursEngine(
  clients: readonly RedlockClient[],
  variant: OursVariant,
  retry: RetryProfile,
  quick: boolean,
  closeClients: () => Promise<void> = () => Promise.resolve(),
): Contender {
  const bare = variant === 'ours-bare';
  const fencing = variant !== 'ours-nofence' && !bare;
  const maxTtl = maxTtlFor(quick);
  const engine = new Redlock(clients, {
    ttl: BENCH_SETTINGS.ttl,
    retryCount: BENCH_SETTINGS.retryCount,
    retryDelay: retry.retryDelay,
    retryJitter: retry.retryJitter,
    driftFactor: BENCH_SETTINGS.driftFactor,
    fencing,
    quarantine: variant !== 'ours-noquarantine' && !bare,
    handoff: variant !== 'ours-nohandoff' && !bare,
    clockCheck: variant !== 'ours-noclock' && !bare,
    fairness: variant === 'ours-fair' ? 'across-processes' : 'local',
    ...(maxTtl === undefined ? {} : { maxTtl }),
    keyPrefix: `bench:${variant}:`,
    logger: { warn: benchWarn },
  });
  const releaseOptions: ReleaseOptions | undefined =
    variant === 'ours-quorumrelease' ? { wait: 'quorum' } : undefined;
  return {
    id: variant,
    label: OURS_LABELS[variant],
    kind: 'ours',
    async lock(resource) {
      const lock = await engine.acquire(resource);
      return { release: () => lock.release(releaseOptions).then(() => undefined) };
    },
    close: () => engine.close().then(closeClients),
    // Until no master is in restart quarantine (its votes would not count yet).
    ready: (deadlineMs) => untilTrusted(engine, deadlineMs),
  };
}

/** The table labels of our rows. */
export const OURS_LABELS: Readonly<Record<OursVariant, string>> = {
  ours: '**nestjs-redlock** (engine)',
  'ours-nofence': 'nestjs-redlock, fencing off',
  'ours-noquarantine': 'nestjs-redlock, restart quarantine off',
  'ours-nohandoff': 'nestjs-redlock, wake-ups off (handoff: false)',
  'ours-noclock': 'nestjs-redlock, clock check off',
  'ours-bare': 'nestjs-redlock, all four off',
  'ours-fair': "nestjs-redlock, fairness: 'across-processes'",
  'ours-quorumrelease': "nestjs-redlock, release at a quorum (wait: 'quorum')",
  'ours-node-redis': 'nestjs-redlock on node-redis clients',
};

/**
 * Our engine with its defaults over node-redis clients (`redis` 6) to the same masters as the
 * shared ioredis `clients`, made for this row and closed with it.
 */
async function oursOnNodeRedis(
  clients: Redis[],
  retry: RetryProfile,
  quick: boolean,
): Promise<Contender> {
  const made = clients.map((c) =>
    createClient({ socket: { host: c.options.host ?? '127.0.0.1', port: c.options.port ?? 6379 } }),
  );
  for (const c of made) c.on('error', () => undefined);
  await Promise.all(made.map((c) => c.connect()));
  return oursEngine(made, 'ours-node-redis', retry, quick, async () => {
    await Promise.all(made.map((c) => c.close()));
  });
}

/** node-redlock 5.0.0-beta.2 (`redlock` on npm). */
export function nodeRedlock(clients: Redis[], retry: RetryProfile): Contender {
  const redlock = new NodeRedlock(clients, {
    driftFactor: BENCH_SETTINGS.driftFactor,
    retryCount: BENCH_SETTINGS.retryCount,
    retryDelay: retry.retryDelay,
    retryJitter: retry.retryJitter,
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
export function sesameRedlock(clients: Redis[], retry: RetryProfile): Contender {
  const redlock = new SesameRedlock(clients, {
    driftFactor: BENCH_SETTINGS.driftFactor,
    retryCount: BENCH_SETTINGS.retryCount,
    retryDelay: retry.retryDelay,
    retryJitter: retry.retryJitter,
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
 * 10 ms) — set to the same base delay as the others. Its background refresh timer is
 * turned off (`refreshInterval: 0`): the other clients do not auto-extend on a plain acquire
 * either.
 */
export function redisSemaphore(clients: Redis[], retry: RetryProfile): Contender {
  return {
    id: 'redis-semaphore',
    label: 'redis-semaphore RedlockMutex',
    kind: 'other',
    async lock(resource) {
      const mutex = new RedlockMutex(clients, `bench:rs:${resource}`, {
        lockTimeout: BENCH_SETTINGS.ttl,
        acquireTimeout: BENCH_SETTINGS.retryCount * retry.retryDelay,
        acquireAttemptsLimit: BENCH_SETTINGS.retryCount + 1,
        retryInterval: retry.retryDelay,
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
export async function redlockUniversal(
  clients: Redis[],
  retry: RetryProfile,
): Promise<Contender | Unavailable> {
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
        retryDelay: retry.retryDelay,
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
export async function rawFloor(clients: Redis[], retry: RetryProfile): Promise<Contender> {
  const raw = new RawFloor(clients, BENCH_SETTINGS.ttl, {
    ...retry,
    retryCount: BENCH_SETTINGS.retryCount,
  });
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

/** The ids of the guarantees' floors. */
export type GuardedFloorId = 'raw-guarded' | 'raw-guarded-nofence' | 'raw-guarded-waitall';

/**
 * The guarantees' floor (see guarded-floor.ts): the raw floor with our default guarantees'
 * commands (`raw-guarded`), with those of the fencing-off row (`raw-guarded-nofence`), or with
 * our defaults' commands and a release that waits for every master as our default release does
 * (`raw-guarded-waitall`).
 */
export async function guardedFloor(
  clients: Redis[],
  retry: RetryProfile,
  id: GuardedFloorId,
): Promise<Contender> {
  const prefix = `bench:${id}:`;
  const floor = new GuardedFloor(
    clients,
    BENCH_SETTINGS.ttl,
    { ...retry, retryCount: BENCH_SETTINGS.retryCount },
    `${prefix}marker`,
    id !== 'raw-guarded-nofence',
    id === 'raw-guarded-waitall' ? 'all' : 'quorum',
  );
  await floor.init();
  return {
    id,
    label: GUARDED_FLOOR_LABELS[id],
    kind: 'floor',
    async lock(resource) {
      const key = prefix + resource;
      const token = await floor.lock(key);
      return { release: () => floor.unlock(key, token) };
    },
    close: async () => undefined,
  };
}

/** The guarantees' floors' table labels. */
export const GUARDED_FLOOR_LABELS = Object.freeze({
  'raw-guarded': "guarantees' floor (raw + marker GET, TIME, INCR, PUBLISH)",
  'raw-guarded-nofence': "guarantees' floor, fencing off (raw + marker GET, TIME, PUBLISH)",
  'raw-guarded-waitall': "guarantees' floor, release waits for every master (as our default's)",
});

/** Whether a value is an {@link Unavailable} marker. */
export function isUnavailable(c: Contender | Unavailable): c is Unavailable {
  return 'reason' in c;
}

/** Ids of the contenders that {@link makeContender} builds (everything but the Nest row). */
export const CONTENDER_IDS = [
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
  'node-redlock',
  'sesamecare',
  'redis-semaphore',
  'redlock-universal',
] as const;
export type ContenderId = (typeof CONTENDER_IDS)[number];

/** Builds one contender by id with the given retry profile (also used in child processes). */
export async function makeContender(
  id: ContenderId,
  clients: Redis[],
  retry: RetryProfile,
  quick: boolean,
): Promise<Contender | Unavailable> {
  switch (id) {
    case 'raw':
      return rawFloor(clients, retry);
    case 'raw-guarded':
    case 'raw-guarded-nofence':
    case 'raw-guarded-waitall':
      return guardedFloor(clients, retry, id);
    case 'ours':
    case 'ours-nofence':
    case 'ours-noquarantine':
    case 'ours-nohandoff':
    case 'ours-noclock':
    case 'ours-bare':
    case 'ours-fair':
    case 'ours-quorumrelease':
      return oursEngine(clients, id, retry, quick);
    case 'ours-node-redis':
      return oursOnNodeRedis(clients, retry, quick);
    case 'node-redlock':
      return nodeRedlock(clients, retry);
    case 'sesamecare':
      return sesameRedlock(clients, retry);
    case 'redis-semaphore':
      return redisSemaphore(clients, retry);
    case 'redlock-universal':
      return redlockUniversal(clients, retry);
  }
}
