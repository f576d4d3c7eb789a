/**
 * A short run of the stability soak (test/soak/soak.ts; the long one is `npm run soak`): churn,
 * 200 waiters on a few resources and master faults for 20 s, then nothing may be left behind —
 * no lock keys, no entries in the engine's tables, no heap growth, no process warning and no
 * unhandled rejection.
 */
import { formatSoak, runSoak } from '../soak/soak';

describe('stability soak (3 masters, churn, 200 waiters, faults)', () => {
  it('leaves no keys, table entries, heap growth or warnings behind', async () => {
    const result = await runSoak({ durationMs: 20_000, waiters: 200 });
    process.stdout.write(`\n${formatSoak(result)}\n`);
    expect(result.failures).toEqual([]);
    // It did what it says: grants in both workloads and both kinds of fault.
    expect(result.counts['waiter ok']).toBeGreaterThan(100);
    expect(result.counts['churn ok']).toBeGreaterThan(100);
    expect(result.counts['fault pause']).toBeGreaterThanOrEqual(1);
    expect(result.counts['fault kill+restart-empty']).toBeGreaterThanOrEqual(1);
  }, 45_000);
});
