import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/** A resource name no other test uses. */
export function uniqueResource(label: string): string {
  return `${label}:${randomBytes(6).toString('hex')}`;
}

/** Values of `key` on each master (`null` where absent or unreachable). */
export async function valuesOn(clients: Redis[], key: string): Promise<(string | null)[]> {
  return Promise.all(clients.map((c) => c.get(key).catch(() => null)));
}

/** Polls `check` every 10 ms until it returns true or `timeoutMs` passes. */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Resolves after `ms` (for letting time pass inside a scenario, never for waiting on servers). */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A logger that records messages, for asserting on warnings. */
export function recordingLogger(): {
  warn(m: string): void;
  debug(m: string): void;
  messages: string[];
} {
  const messages: string[] = [];
  return { warn: (m) => messages.push(m), debug: (m) => messages.push(m), messages };
}

/** Every key on each master (SCAN over the whole keyspace), sorted per master. */
export async function keyspaceOf(clients: Redis[]): Promise<string[][]> {
  return Promise.all(
    clients.map(async (c) => {
      const keys: string[] = [];
      let cursor = '0';
      do {
        const [next, batch] = await c.scan(cursor, 'COUNT', 1000);
        keys.push(...batch);
        cursor = next;
      } while (cursor !== '0');
      return keys.sort();
    }),
  );
}

/**
 * Keys that are on a master now (`after`) and were not before, per master. Keys may disappear
 * meanwhile: the release of an earlier lock resolves on a majority, the last master's delete may
 * land later.
 */
export function newKeys(before: string[][], after: string[][]): string[][] {
  return after.map((keys, i) => keys.filter((k) => !before[i].includes(k)));
}
