import { withFields } from '../base/fields';
import { ReplyFormatError, decodeInspect } from './kinds/kind';
import type { InspectOutcome } from '../store';
import { agreedState } from '../quorum/agreement';
import type { HolderReport } from '../quorum/agreement';
import type { RedisContext } from './context';
import { INSPECT_READ_SCRIPT } from './scripts/inspect';

/** One master's inspect answer. */
interface InspectAnswer extends HolderReport {
  /** The boot marker's age (ms, server clock), -1 when missing or not read. */
  readonly markerAge: number;
}

/**
 * `inspect` on the masters: one read-only script per master (redis/scripts/inspect.ts), all in
 * parallel, each bounded by the request timeout; the round waits for every master (or the
 * timeout) and states what a quorum agrees on (quorum/agreement.ts).
 *
 * Read-only: the script writes nothing, and the request is sent without the post-connect check
 * of acquires (which may seed the boot marker): an answer is used as it is. Not an attempt: no
 * event, no clean-up, no hand-off.
 *
 * Restart quarantine: a master whose boot marker is younger than the quarantine (or missing) may
 * have lost holders when it restarted. Its answer counts where it reports holders (those keys are
 * real: they were written since the restart), never as evidence that a resource is free. Like an
 * acquire, the round therefore needs answers from `quorum` masters outside quarantine; with fewer
 * (masters down, timed out or in quarantine) there is no state (`NoQuorumError` for the caller).
 *
 * Cluster: one key, so one call; the Cluster client routes it to the key's slot.
 */
export async function inspectOnMasters(
  store: RedisContext,
  resource: string,
): Promise<InspectOutcome> {
  const { settings } = store;
  const key = store.keyOf(resource);
  const duration = settings.quarantine.duration;
  const tally = await store.round<InspectAnswer>({
    timeout: settings.requestTimeout,
    waitAll: true,
    send: (node) => {
      const checks = node.checksMarker;
      return node
        .evalScript(INSPECT_READ_SCRIPT, checks ? [key, store.markerKey] : [key], [
          checks ? '1' : '0',
        ])
        .then(readAnswer);
    },
    judge: (a, node) =>
      node.checksMarker && (a.markerAge < 0 || a.markerAge < duration) ? 'quarantined' : 'ok',
  });
  store.noteQuarantined(
    withFields(tally, {
      replies: tally.replies.map((r) =>
        r?.kind === 'reply'
          ? withFields(r, { value: { markerAge: Math.max(0, r.value.markerAge) } })
          : r,
      ),
    }),
  );
  if (tally.ok < store.quorum) return { state: undefined, votes: tally.votes };
  const reports: HolderReport[] = [];
  for (const r of tally.replies) if (r?.kind === 'reply') reports.push(r.value);
  return { state: agreedState(reports, store.quorum), votes: tally.votes };
}

/** Decodes one master's reply (a malformed one is an error vote, never a report). */
function readAnswer(reply: unknown): InspectAnswer {
  if (!Array.isArray(reply) || reply.length !== 6 || !Number.isSafeInteger(reply[5])) {
    throw new ReplyFormatError('inspect', reply);
  }
  const r = decodeInspect(reply.slice(0, 5));
  const blocking = r.found.kind === 'mutex' || r.found.kind === 'foreign';
  // A foreign key (not written by the engine) blocks every acquire like a holder would.
  const holders = blocking ? 1 : r.holders;
  const ttl = holders === 0 ? 0 : r.ttl < 0 ? Infinity : r.ttl;
  return { holders, ttl, markerAge: reply[5] as number };
}
