import type { LockKindSpec } from '../kind-spec';
import type { Tally } from '../quorum/round';
import { SHARED, semaphoreKind } from './holders';
import type { AcquireAnswer, LockKind } from './kind';
import { MUTEX } from './mutex';
import { waitKey } from '../keys';

/** What the Redis store (lib/core/redis-store.ts) needs to know of the kinds, beside LockKind. */

/** The {@link LockKind} of a request's kind (the mutex when none is given). */
export function lockKindFor(spec: LockKindSpec | undefined): LockKind {
  if (!spec || spec.name === 'mutex') return MUTEX;
  return spec.name === 'shared' ? SHARED : semaphoreKind(spec.limit ?? 1);
}

/**
 * The writer-waiting flag part of an acquire's input (keys.ts `waitKey`, docs/lock-kinds.md):
 * readers always read the flags; a plain lock raises them only when it will retry (`writerWait` > 0
 * ms).
 */
export function waitInput(
  kind: LockKind,
  writerWait: number | undefined,
  prefix: string,
  resources: readonly string[],
): { waitKeys?: readonly string[]; waitTtl?: number } {
  const keys = (): string[] => resources.map((r) => waitKey(prefix, r));
  if (kind.name === 'shared') return { waitKeys: keys() };
  if (kind.name === 'mutex' && writerWait) return { waitKeys: keys(), waitTtl: writerWait };
  return {};
}

/** The other kind a master reported at a key during an acquire round, if any. */
export function mismatchIn(tally: Tally<AcquireAnswer>): AcquireAnswer['mismatch'] {
  for (const r of tally.replies) {
    if (r?.kind === 'reply' && r.value.mismatch) return r.value.mismatch;
  }
  return undefined;
}
