/**
 * The benchmark's HTTP scenario (bench/http.ts, bench/http-server.ts) on masters that never held
 * the server's key prefix: every `@Locked` request succeeds. The restart quarantine is per key
 * prefix and dates a prefix's first check on a master as its start, so a server that took load
 * at once answered every locked request 503 for the quarantine's length (a whole full run's
 * scenario: 18,859 of 18,859). The server now waits until none of its masters is quarantined
 * before it reports its port. Quick mode (`BENCH_QUICK=1`: `maxTtl` = the bench ttl, a ~10 s
 * quarantine).
 */
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { runHttp } from '../../bench/http';
import { useMasters } from '../harness/engines';

const suite = useMasters(3);

describe('bench: HTTP scenario', () => {
  let quick: string | undefined;
  let progress: { mockRestore(): void } | undefined;
  beforeAll(() => {
    quick = process.env.BENCH_QUICK;
    process.env.BENCH_QUICK = '1';
    // The scenario's progress lines (console.error, as in a bench run) stay out of the test log.
    progress = jest.spyOn(console, 'error').mockImplementation(() => undefined);
  });
  afterAll(() => {
    progress?.mockRestore();
    if (quick === undefined) delete process.env.BENCH_QUICK;
    else process.env.BENCH_QUICK = quick;
  });

  it('answers every @Locked request on masters that never held its key prefix', async () => {
    const result = await runHttp(suite.masters.urls, 1, 1);
    const locked = result.rows.find((r) => r.id === 'locked');
    expect(locked).toBeDefined();
    expect(locked?.reqPerSec).toBeGreaterThan(0);
    expect(locked?.codes).toEqual({});
    expect(locked?.non2xx).toBe(0);
    expect(locked?.errors).toBe(0);
  }, 120_000);
});
