/**
 * A local hand-over carries `FairGrant.installedBy` on (fair/handover.ts `Handover.installedBy`):
 * the attempt that takes a lock over from a holder installed by another engine's yield or pass
 * asks the store to keep that installer's token on its grant, so that the pass ending this
 * engine's streak is still that release's follower on a master that has not run it
 * (redis/scripts/release.ts ARGV[14]; on real masters: test/core/fair/installs.spec.ts). The engine's
 * policy over the in-memory store (pure logic: what the store is asked).
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import type { FairAttemptRequest } from '../../../lib/core/fair/fair-store';
import { Redlock } from '../../../lib/core/redlock';
import { InMemoryStore } from '../../../lib/testing/in-memory-store';

const engines: Redlock[] = [];
afterEach(async () => {
  for (const e of engines.splice(0)) await e.close();
});

/** An engine over an in-memory store whose `attempt` calls are recorded in `seen`. */
function recorded(): { rl: Redlock; seen: FairAttemptRequest[]; memory: InMemoryStore } {
  const memory = new InMemoryStore();
  const seen: FairAttemptRequest[] = [];
  const attempt = memory.attempt.bind(memory);
  memory.attempt = (req) => {
    seen.push(req);
    return attempt(req);
  };
  const rl = new Redlock(memory.factory(), {
    fairness: 'across-processes',
    quarantine: false,
    handoff: false,
    requestTimeout: 1,
  });
  engines.push(rl);
  return { rl, seen, memory };
}

describe('a local hand-over and installedBy', () => {
  it("the taker's attempt carries the releasing holder's installedBy along", async () => {
    const { rl, seen, memory } = recorded();
    // The first grant stands for a lock installed by another engine's pass.
    const attempt = memory.attempt.bind(memory);
    memory.attempt = async (req) => {
      const out = await attempt(req);
      if (out.grant && (req as FairAttemptRequest).handoverFrom === undefined) {
        (out.grant as { installedBy?: string }).installedBy = 'installer-token';
      }
      return out;
    };
    const first = await rl.acquire('r', { ttl: 10_000 });
    const next = rl.acquire('r', { ttl: 10_000 });
    await new Promise((r) => setTimeout(r, 5)); // queued behind the holder
    await first.release();
    const taker = await next;
    const handover = seen.find((q) => q.handoverFrom !== undefined);
    expect(handover?.handoverFrom).toBeDefined();
    expect(handover?.installedBy).toBe('installer-token');
    await taker.release();
  });

  it('a holder that no install granted hands over no installedBy', async () => {
    const { rl, seen } = recorded();
    const first = await rl.acquire('r', { ttl: 10_000 });
    const next = rl.acquire('r', { ttl: 10_000 });
    await new Promise((r) => setTimeout(r, 5));
    await first.release();
    await (await next).release();
    const handover = seen.find((q) => q.handoverFrom !== undefined);
    expect(handover?.handoverFrom).toBeDefined();
    expect(handover?.installedBy).toBeUndefined();
    // An attempt without a hand-over never carries one.
    expect(seen.filter((q) => q.handoverFrom === undefined && q.installedBy !== undefined)).toEqual(
      [],
    );
  });
});
