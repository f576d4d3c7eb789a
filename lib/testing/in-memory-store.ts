import { randomBytes } from 'node:crypto';
import { monotonicNow } from '../core/base/clock';
import type { NodeOutcome, NodeVote } from '../core/base/errors';
import { expire, lockOfGrant, lockState } from '../core/lock/lock';
import type { Lock } from '../core/lock/lock';
import { STORE_FACTORY } from '../core/store';
import type {
  AnnouncementListener,
  AttemptOutcome,
  AttemptRequest,
  ExtendOutcome,
  Grant,
  InspectOutcome,
  LockStore,
  ReleaseWatch,
  StoreFactory,
  StoreFootprint,
} from '../core/store';
import type { ReleaseResult } from '../core/quorum/protocol';
import { errorMessage } from '../core/base/validate';
import type { ResolvedSettings } from '../core/base/settings';
import type { MasterHealth } from '../core/base/types';
import { MUTEX_SPEC } from '../core/base/kind-spec';
import { admission, pruneSlot } from './in-memory-kinds';
import type { Admission, Holding, Slot } from './in-memory-kinds';
import type { FairAttemptRequest } from '../core/fair';

/** Who holds a resource in an in-memory engine. */
export type InMemoryHolder =
  /** A lock acquired through this engine. */
  | { readonly kind: 'lock'; readonly lock: Lock }
  /** A hold made with `hold()`: "someone else" (another instance, a stale process). */
  | { readonly kind: 'external' };

/** The name of the one simulated master. */
export const IN_MEMORY_MASTER = 'in-memory';

const NO_HANDOFF: StoreFootprint = { handoffChannels: 0, handoffRecent: 0, handoffWaiters: 0 };

/**
 * A single-process store for the engine's policy (lib/core/store.ts): one simulated
 * master, a table of keys with ttl expiry, and fault controls for tests. The policy around it —
 * validation, retries, keep-alive, events, the lock's life — is the real engine's.
 */
export class InMemoryStore implements LockStore {
  readonly masterNames = [IN_MEMORY_MASTER];
  readonly footprint = NO_HANDOFF;
  /** One slot per resource: its holders (one for a plain lock) and their kind. */
  private readonly entries = new Map<string, Slot>();
  private readonly fences = new Map<string, number>();
  /** Release watches per resource (the engine's local queue keeps one per contended resource). */
  private readonly watchers = new Map<string, Set<() => void>>();
  private available = true;
  private settings!: ResolvedSettings;

  /** How the engine opens this store (see {@link StoreFactory}). */
  factory(): StoreFactory {
    return {
      [STORE_FACTORY]: true,
      masters: 1,
      open: (settings) => {
        this.settings = settings;
        return this;
      },
    };
  }

  get quorum(): number {
    return this.settings.quorum;
  }

  async attempt(req: AttemptRequest): Promise<AttemptOutcome> {
    const { resources, ttl } = req;
    const now = monotonicNow();
    if (!this.available) {
      return { refusal: 'unavailable', votes: [vote('error', 'simulated outage')] };
    }
    const kind = req.kind ?? MUTEX_SPEC;
    // A local hand-over (core/fair/handover.ts): the releasing holder's plain lock counts as free.
    const from = kind.name === 'mutex' ? (req as FairAttemptRequest).handoverFrom : undefined;
    const answers = resources.map((r) => {
      const slot = this.live(r, now);
      const mine = from !== undefined && slot?.holders.size === 1 && slot.holders.has(from);
      return admission(mine ? undefined : slot, kind, now, req.writerWait ?? 0);
    });
    const mismatch = answers.find((a) => a.status === 'mismatch');
    if (mismatch) return { refusal: 'kind-mismatch', votes: [vote('held')], found: mismatch.found };
    const refused = answers.filter(
      (a): a is Extract<Admission, { status: 'held' }> => a.status === 'held',
    );
    if (refused.length > 0) {
      const ttls = refused.map((a) => a.ttl);
      const held: NodeVote = ttls.every(Number.isFinite)
        ? { ...vote('held'), holderTtl: Math.max(...ttls) }
        : vote('held');
      return { refusal: 'contended', votes: [held] };
    }
    const token = randomBytes(20).toString('base64url');
    const fencingTokens: number[] = []; // in the order of `resources`
    if (this.settings.fencing) {
      for (const r of resources) {
        const next = (this.fences.get(r) ?? 0) + 1;
        this.fences.set(r, next);
        fencingTokens.push(next);
      }
    }
    const grant: Grant = {
      resources,
      token,
      ttl,
      start: now,
      wallStart: Date.now(),
      votes: [vote('ok')],
      fencingTokens,
      ended: false,
      ...(kind.name !== 'mutex' ? { kind } : {}),
      // As the Redis store: the most watches of one resource (one per engine that waits).
      ...(from !== undefined
        ? { watchers: Math.max(...resources.map((r) => this.watchers.get(r)?.size ?? 0)) }
        : {}),
    };
    for (const r of resources) {
      const slot = this.entries.get(r) ?? { kind, holders: new Map(), writerWaitUntil: 0 };
      if (from !== undefined) slot.holders.delete(from);
      // A writer granted: its writer-waiting flag ends (core/redis/kinds/writer-flag.ts).
      if (kind.name === 'mutex' && (req.writerWait ?? 0) > 0) slot.writerWaitUntil = 0;
      if (slot.holders.size === 0) slot.kind = kind;
      slot.holders.set(token, { token, expiresAt: now + ttl, grant });
      this.entries.set(r, slot);
    }
    return { grant };
  }

  /**
   * Same rules as the real engine with its single master: a lost key is lost for good (the real
   * engine's repair never counts a master whose key was put back, so with one master it could
   * not save the lock either); nothing changes during a simulated outage.
   */
  async extend(grant: Grant, ttl: number): Promise<ExtendOutcome> {
    const now = monotonicNow();
    if (!this.available) {
      return { verdict: 'unavailable', votes: [vote('error', 'simulated outage')], elapsed: 0 };
    }
    const mine = grant.resources.map((r) => this.live(r, now)?.holders.get(grant.token));
    if (!mine.every((e) => e !== undefined)) {
      return { verdict: 'lost', votes: [vote('held')], elapsed: 0 };
    }
    for (const e of mine) e.expiresAt = now + ttl;
    return {
      verdict: 'extended',
      start: now,
      wallStart: Date.now(),
      end: monotonicNow(),
      votes: [vote('ok')],
    };
  }

  /**
   * Compare-and-delete; nothing is deleted during a simulated outage (the keys expire). With
   * `keepFor` (lockAtLeastFor), entries still ours expire `keepFor` ms from now instead.
   */
  async release(grant: Grant, _waitAll?: boolean, keepFor?: number): Promise<ReleaseResult> {
    if (!this.available) {
      return { deleted: 0, complete: false, votes: [vote('error', 'simulated outage')] };
    }
    const now = monotonicNow();
    let deleted = false;
    for (const r of grant.resources) {
      const slot = this.entries.get(r);
      const mine = slot?.holders.get(grant.token);
      if (slot && mine && mine.expiresAt > now) {
        if (keepFor !== undefined && keepFor > 0) mine.expiresAt = now + keepFor;
        else slot.holders.delete(grant.token);
        deleted = true;
        this.dropIfEmpty(r, slot);
      }
    }
    if (deleted && !(keepFor !== undefined && keepFor > 0)) this.announce(grant.resources);
    return { deleted: deleted ? 1 : 0, complete: true, votes: [vote(deleted ? 'ok' : 'held')] };
  }

  /**
   * Read-only, like the real store: the one simulated master's view (a hold made with `hold()`
   * without ttl reports `ttl: -1`, like a key without expiry); no state during an outage.
   */
  async inspect(resource: string): Promise<InspectOutcome> {
    if (!this.available) return { state: undefined, votes: [vote('error', 'simulated outage')] };
    const now = monotonicNow();
    const live = [...(this.entries.get(resource)?.holders.values() ?? [])].filter(
      (h) => h.expiresAt > now,
    );
    if (live.length === 0) {
      return { state: { locked: false, holders: 0, ttl: 0 }, votes: [vote('ok')] };
    }
    const left = Math.max(...live.map((h) => h.expiresAt)) - now;
    const ttl = Number.isFinite(left) ? Math.max(1, Math.ceil(left)) : -1;
    return { state: { locked: true, holders: live.length, ttl }, votes: [vote('ok')] };
  }

  /** The simulated master: reachable unless an outage is simulated, never in quarantine. */
  async health(): Promise<MasterHealth[]> {
    const base = { node: 0, name: IN_MEMORY_MASTER, quarantined: false };
    return [
      this.available
        ? { ...base, reachable: true, latency: 0 }
        : { ...base, reachable: false, latency: undefined, error: 'simulated outage' },
    ];
  }

  /**
   * Every change that may free a resource — release, `free()`, `loseLock()`, `reset()`, the end
   * of a simulated outage — is announced synchronously to the watchers of that resource.
   */
  async watchReleases(resource: string, onRelease: AnnouncementListener): Promise<ReleaseWatch> {
    let set = this.watchers.get(resource);
    if (!set) this.watchers.set(resource, (set = new Set()));
    // One announcement per change (no masters to repeat it); no token to name.
    const entry = (): void => onRelease('release', '', false);
    set.add(entry);
    const watchers = set;
    return {
      activeSince: -Infinity, // announced synchronously: nothing to miss
      live: true,
      stop: () => {
        watchers.delete(entry);
        if (watchers.size === 0 && this.watchers.get(resource) === watchers) {
          this.watchers.delete(resource);
        }
      },
    };
  }

  describe(err: unknown): string {
    return errorMessage(err);
  }

  /** A waiting writer gave up: its writer-waiting flags end (core/redis/kinds/writer-flag.ts). */
  writerGaveUp(resources: readonly string[]): void {
    for (const r of resources) {
      const slot = this.entries.get(r);
      if (slot) slot.writerWaitUntil = 0;
    }
  }

  /** The engine wakes and refuses its waiting acquires itself (it drains first). */
  async close(): Promise<void> {
    this.watchers.clear();
  }

  // --- fault controls (see InMemoryRedlock) ---------------------------------------------------

  /** Makes `resources` look held by another process until `until` (monotonic ms). */
  hold(resources: readonly string[], until: number): void {
    const now = monotonicNow();
    const busy = resources.filter((r) => (this.live(r, now)?.holders.size ?? 0) > 0);
    if (busy.length > 0) {
      throw new Error(`InMemoryRedlock.hold: ${busy.join(', ')} already held`);
    }
    const token = `external:${randomBytes(8).toString('hex')}`;
    for (const r of resources) {
      const holders = new Map<string, Holding>([[token, { token, expiresAt: until }]]);
      this.entries.set(r, { kind: MUTEX_SPEC, holders, writerWaitUntil: 0 });
    }
  }

  /** Ends holds made with {@link hold}. */
  free(resources: readonly string[]): boolean {
    let freed = false;
    for (const r of resources) {
      const slot = this.entries.get(r);
      for (const h of slot?.holders.values() ?? []) {
        if (!h.grant) {
          slot?.holders.delete(h.token);
          freed = true;
        }
      }
      if (slot) this.dropIfEmpty(r, slot);
    }
    if (freed) this.announce(resources);
    return freed;
  }

  /** The resource's key vanishes; its holders (all readers / semaphore holders) learn it at once. */
  loseLock(resource: string): Lock | undefined {
    const slot = this.live(resource, monotonicNow());
    const locks = [...(slot?.holders.values() ?? [])]
      .map((h) => h.grant && lockOfGrant(h.grant))
      .filter((l): l is Lock => l !== undefined);
    if (locks.length === 0) return undefined;
    this.entries.delete(resource);
    for (const lock of locks) loseNow(lock, 'it was lost (simulated by the testing module)');
    this.announce([resource]);
    return locks[0];
  }

  setAvailable(available: boolean): void {
    this.available = available;
    if (available) this.announce([...this.watchers.keys()]);
  }

  holderOf(resource: string): InMemoryHolder | undefined {
    return this.holdersOf(resource)[0];
  }

  /** Every live holder of `resource` (several for shared locks and semaphores). */
  holdersOf(resource: string): InMemoryHolder[] {
    const slot = this.live(resource, monotonicNow());
    return [...(slot?.holders.values() ?? [])].map((h) => {
      const lock = h.grant && lockOfGrant(h.grant);
      return lock ? { kind: 'lock', lock } : { kind: 'external' };
    });
  }

  heldResources(): string[] {
    const now = monotonicNow();
    return [...this.entries.keys()]
      .filter((r) => (this.live(r, now)?.holders.size ?? 0) > 0)
      .sort();
  }

  reset(): void {
    for (const slot of this.entries.values()) {
      for (const h of slot.holders.values()) {
        const lock = h.grant && lockOfGrant(h.grant);
        if (lock) loseNow(lock, 'the in-memory engine was reset');
      }
    }
    this.entries.clear();
    this.available = true;
    this.announce([...this.watchers.keys()]);
  }

  /**
   * The slot of `resource` with its live holders only; `undefined` when nobody holds it (the slot
   * stays while a writer-waiting flag lives).
   */
  private live(resource: string, now: number): Slot | undefined {
    const slot = this.entries.get(resource);
    if (!slot) return undefined;
    if (pruneSlot(slot, now) > 0) return slot;
    if (slot.writerWaitUntil <= now) this.entries.delete(resource);
    return slot.writerWaitUntil > now ? slot : undefined;
  }

  private dropIfEmpty(resource: string, slot: Slot): void {
    if (slot.holders.size === 0 && slot.writerWaitUntil <= monotonicNow()) {
      this.entries.delete(resource);
    }
  }

  private announce(resources: readonly string[]): void {
    for (const r of resources) {
      const set = this.watchers.get(r);
      if (set) for (const w of [...set]) w();
    }
  }
}

/**
 * Marks a lock lost now. Reads `lock.signal` first: core's `expire()` aborts only a signal that
 * exists, and a signal first read after the loss would never abort.
 */
function loseNow(lock: Lock, why: string): void {
  void lock.signal;
  expire(lock, lockState(lock), why);
}

function vote(outcome: NodeOutcome, error?: string): NodeVote {
  return error === undefined
    ? { node: 0, name: IN_MEMORY_MASTER, outcome, latency: 0 }
    : { node: 0, name: IN_MEMORY_MASTER, outcome, latency: 0, error };
}
