/**
 * Shared helpers of the e2e suites: boot the sample app (sample/app.module.ts) against real
 * redis-server masters started by the harness, and look at lock keys on the masters.
 *
 * The sample is loaded with a dynamic import so that a suite can set environment variables
 * (e.g. `SAMPLE_JANITOR_CRON`) before its modules are evaluated.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { SampleApp, SampleAppOptions } from '../../sample/app.module';
import type { RedlockModuleOptions } from '../../lib';
import { fenceKey as fenceKeyOf } from '../../lib/core/base/keys';
import { RedisMasters } from '../harness/redis-masters';

/** The two HTTP platforms every HTTP behaviour is checked on. */
export const PLATFORMS = ['express', 'fastify'] as const;

/** One of {@link PLATFORMS}. */
export type Platform = (typeof PLATFORMS)[number];

/** A short random id, to keep tests from sharing keys. */
export function uid(label = ''): string {
  return `${label}${randomBytes(4).toString('hex')}`;
}

/** Short timings so that the suites stay fast (see SampleTimings). */
export const FAST_TIMINGS = {
  paymentMs: 250,
  stockWriteMs: 10,
  handlerMs: 250,
  fulfilmentStepMs: 1000,
  // 600 ms: each automatic extension (a third of the ttl before expiry) has 200 ms to land,
  // which 400 ms left too tight on a loaded machine.
  reportTtlMs: 600,
  reportMs: 1800,
} as const;

/** Boots the sample app on 127.0.0.1 with a free port. */
export async function bootSample(
  options: Omit<SampleAppOptions, 'store'> & { store?: string; redlock: RedlockModuleOptions },
): Promise<SampleApp> {
  const { createSampleApp } = await import('../../sample/app.module');
  return createSampleApp({
    store: 'memory',
    scheduler: false,
    logger: false,
    namespace: uid('e2e:') + ':',
    ...options,
    timings: { ...FAST_TIMINGS, ...options.timings },
  });
}

/** Redis key of a resource's lock with the default key prefix. */
export function lockKey(resource: string): string {
  return `lock:{${resource}}`;
}

/** Redis key of the fencing counter that serves a resource (its slot's), default key prefix. */
export function fenceKey(resource: string): string {
  return fenceKeyOf('lock:', resource);
}

/** How many of the masters hold a lock key for `resource` (unreachable masters count as not). */
export async function holdersOf(clients: Redis[], resource: string): Promise<number> {
  const values = await Promise.all(clients.map((c) => c.exists(lockKey(resource)).catch(() => 0)));
  return values.filter((v) => v === 1).length;
}

/** Polls `check` every 20 ms until it returns true, or fails after `timeoutMs`. */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Starts `n` masters and clients to inspect them (closed by `masters.stop()`). */
export async function startMasters(
  n: number,
): Promise<{ masters: RedisMasters; clients: Redis[] }> {
  const masters = await RedisMasters.start(n);
  const clients = masters.createClients();
  await RedisMasters.ready(clients);
  return { masters, clients };
}
