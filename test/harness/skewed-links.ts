/**
 * Contenders with uneven per-link latency: each contender has its own connections to every
 * master, through its own TCP delay proxy per link (delay-proxy.ts) with a fixed one-way delay,
 * so that the contenders' commands reach the masters in different orders. Shared by the
 * semaphore skew tests (test/core/kinds-skew-load.spec.ts) and bench/kinds.ts.
 */
import type { Redis } from 'ioredis';
import { Redis as IORedis } from 'ioredis';
import { DelayProxy } from './delay-proxy';
import { RedisMasters, closeClient } from './redis-masters';

/** One contender's links: `clients[m]` reaches master `m` through `proxies[m]`. */
export interface SkewedContender {
  readonly proxies: readonly DelayProxy[];
  readonly clients: readonly Redis[];
}

/** The contenders' links, and how to close them. */
export interface SkewedLinks {
  readonly contenders: readonly SkewedContender[];
  close(): Promise<void>;
}

/** A deterministic pseudo-random generator (the same skew on every run). */
export function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

/**
 * `count` contenders in front of the masters at `ports`, each link with a fixed extra one-way
 * delay of 0..`maxDelay` ms (`up` and `down`, drawn from `seed`).
 */
export async function skewedLinks(
  ports: readonly number[],
  count: number,
  maxDelay: number,
  seed = 42,
): Promise<SkewedLinks> {
  const rand = seeded(seed);
  const contenders: SkewedContender[] = [];
  for (let c = 0; c < count; c++) {
    const proxies = await Promise.all(
      ports.map((port) => {
        const d = Math.round(rand() * maxDelay);
        return DelayProxy.start(port, { up: d, down: d });
      }),
    );
    const clients = proxies.map(
      (p) =>
        new IORedis({
          host: '127.0.0.1',
          port: p.port,
          maxRetriesPerRequest: 0,
          enableOfflineQueue: false,
          lazyConnect: false,
        }),
    );
    contenders.push({ proxies, clients });
  }
  await RedisMasters.ready(contenders.flatMap((c) => [...c.clients]));
  return {
    contenders,
    close: async () => {
      await Promise.all(contenders.flatMap((c) => c.clients.map((x) => closeClient(x))));
      await Promise.all(contenders.flatMap((c) => c.proxies.map((p) => p.close())));
    },
  };
}

/** Holders' intervals (monotonic ms): the most that overlap at one instant. */
export function mostAtOnce(held: readonly { from: number; to: number }[]): number {
  const edges = held.flatMap((h) => [
    [h.from, 1],
    [h.to, -1],
  ]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]); // a release before a grant at the same ms
  let now = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, (now += d));
  return most;
}
