/**
 * The kind of a lock as requested and as a {@link Lock} reports it (docs/lock-kinds.md):
 *
 * - `mutex`: a plain lock, one holder (the exclusive / write side of a shared lock);
 * - `shared`: a shared (read) lock, any number of holders, never together with a plain lock;
 * - `semaphore`: a counting semaphore of `limit` holders.
 */
export type LockKindName = 'mutex' | 'shared' | 'semaphore';

/** A lock's kind and, for a semaphore, its limit. */
export interface LockKindSpec {
  /** `mutex` (plain, exclusive), `shared` (read) or `semaphore`. */
  readonly name: LockKindName;
  /** A semaphore's limit (≥ 1); `undefined` for the other kinds. */
  readonly limit?: number;
}

/** The plain lock. */
export const MUTEX_SPEC: LockKindSpec = Object.freeze({ name: 'mutex' });
/** A shared (read) lock. */
export const SHARED_SPEC: LockKindSpec = Object.freeze({ name: 'shared' });

/** A readable name: `mutex`, `shared`, `semaphore (limit 3)`. */
export function describeKind(spec: LockKindSpec): string {
  return spec.name === 'semaphore' ? `semaphore (limit ${spec.limit})` : spec.name;
}

/** What a script found at a key. `foreign` is anything we did not write (its Redis type). */
export type FoundKind =
  | { readonly kind: 'none' }
  | { readonly kind: 'mutex' }
  | { readonly kind: 'shared' }
  | { readonly kind: 'semaphore'; readonly limit: number }
  | { readonly kind: 'foreign'; readonly redisType: string };
