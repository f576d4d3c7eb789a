/**
 * Two engines contending for one resource (fairness across processes): each engine's callers
 * acquire, hold 1 ms and release, `rounds` times each.
 */
import type { Redlock } from '../../lib/core/redlock';

/**
 * Runs 4 callers on each engine (`a0..a3` on `a`, `b0..b3` on `b`) for `rounds` locks each and
 * returns the callers' names in grant order.
 */
export async function contend(
  a: Redlock,
  b: Redlock,
  resource: string,
  rounds: number,
): Promise<string[]> {
  const grants: string[] = [];
  const caller = async (rl: Redlock, name: string): Promise<void> => {
    for (let i = 0; i < rounds; i++) {
      const lock = await rl.acquire(resource);
      grants.push(name);
      await new Promise((done) => setTimeout(done, 1));
      await lock.release();
    }
  };
  await Promise.all([
    ...[0, 1, 2, 3].map((i) => caller(a, `a${i}`)),
    ...[0, 1, 2, 3].map((i) => caller(b, `b${i}`)),
  ]);
  return grants;
}

/**
 * The most grants in a row to one engine while both engines still had callers (grant names as
 * {@link contend} gives them: the engine is the first letter).
 */
export function longestStreak(grants: readonly string[]): number {
  const lastOf = (p: string): number => grants.reduce((m, g, i) => (g[0] === p ? i : m), -1);
  const both = grants.slice(0, Math.min(lastOf('a'), lastOf('b')));
  let run = 0;
  let longest = 0;
  both.forEach((g, i) => {
    run = i > 0 && g[0] === both[i - 1][0] ? run + 1 : 1;
    longest = Math.max(longest, run);
  });
  return longest;
}
