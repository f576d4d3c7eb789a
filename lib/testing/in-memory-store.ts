import { randomBytes } from 'node:crypto';
import { monotonicNow } from '../core/clock';
import type { NodeOutcome, NodeVote } from '../core/errors';
import { expire, lockOfGrant, lockState } from '../core/lock';
import type { Lock } from '../core/lock';
import { STORE_FACTORY } from '../core/policy/store';
import type {
  AttemptOutcome,
  AttemptRequest,
  ExtendOutcome,
  Grant,
  InspectOutcome,
  LockStore,
  ReleaseWatch,
  StoreFactory,
  StoreFootprint,
} from '../core/policy/store';
import type { ReleaseResult } from '../core/quorum/protocol';
import { errorMessage } from '../core/masters/node';
import type { ResolvedSettings } from '../core/settings';
import type { MasterHealth } from '../core/types';

/** Who holds a resource in an in-memory engine. */
export type InMemoryHolder =
  /** A lock acquired through this engine. */
  | { readonly kind: 'lock'; readonly lock: Lock }
  /** A hold made with `hold()`: "someone else" (another instance, a stale process). */
  | { readonly kind: 'external' };

interface Entry {
  readonly token: string;
  /** Monotonic ms at which the key would expire in Redis; `Infinity` for an open-ended hold. */
  expiresAt: number;
  readonly grant?: Grant;
}

/** The name of the one simulated master. */
export const IN_MEMORY_MASTER = 'in-memory';

const NO_HANDOFF: StoreFootprint = { handoffChannels: 0, handoffRecent: 0, handoffWaiters: 0 };

/**
 * A single-process store for the engine's policy (lib/core/policy/store.ts): one simulated
 * master, a table of keys with ttl expiry, and fault controls for tests. The policy around it —
 * validation, retries, keep-alive, events, the lock's life — is the real engine's.
 */
export class InMemoryStore implements LockStore {
  readonly masterNames = [IN_MEMORY_MASTER];
  readonly footprint = NO_HANDOFF;
  private readonly entries = new Map<string, Entry>();
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
    const holders = resources.map((r) => this.live(r, now)).filter((e) => e !== undefined);
    if (holders.length > 0) {
      const finite = holders.map((e) => e.expiresAt - now).filter((t) => Number.isFinite(t));
      const held: NodeVote =
        finite.length === holders.length
          ? { ...vote('held'), holderTtl: Math.ceil(Math.max(...finite)) }
          : vote('held');
      return { refusal: 'contended', votes: [held] };
    }
    const token = randomBytes(20).toString('base64url');
    const fencingTokens = Object.create(null) as Record<string, number>; // '__proto__' is a resource too
    if (this.settings.fencing) {
      for (const r of resources) {
        const next = (this.fences.get(r) ?? 0) + 1;
        this.fences.set(r, next);
        fencingTokens[r] = next;
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
    };
    for (const r of resources) this.entries.set(r, { token, expiresAt: now + ttl, grant });
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
    const mine = grant.resources.map((r) => this.live(r, now));
    if (!mine.every((e) => e?.token === grant.token)) {
      return { verdict: 'lost', votes: [vote('held')], elapsed: 0 };
    }
    for (const e of mine) if (e) e.expiresAt = now + ttl;
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
      const e = this.live(r, now);
      if (e && e.token === grant.token) {
        if (keepFor !== undefined && keepFor > 0) e.expiresAt = now + keepFor;
        else this.entries.delete(r);
        deleted = true;
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
    const e = this.peek(resource, monotonicNow());
    if (!e) return { state: { locked: false, holders: 0, ttl: 0 }, votes: [vote('ok')] };
    const left = e.expiresAt - monotonicNow();
    const ttl = Number.isFinite(left) ? Math.max(1, Math.ceil(left)) : -1;
    return { state: { locked: true, holders: 1, ttl }, votes: [vote('ok')] };
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
  async watchReleases(resource: string, onRelease: () => void): Promise<ReleaseWatch> {
    let set = this.watchers.get(resource);
    if (!set) this.watchers.set(resource, (set = new Set()));
    const entry = (): void => onRelease();
    set.add(entry);
    const watchers = set;
    return {
      fresh: false,
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

  /** The engine wakes and refuses its waiting acquires itself (it drains first). */
  async close(): Promise<void> {
    this.watchers.clear();
  }

  // --- fault controls (see InMemoryRedlock) ---------------------------------------------------

  /** Makes `resources` look held by another process until `until` (monotonic ms). */
  hold(resources: readonly string[], until: number): void {
    const now = monotonicNow();
    const busy = resources.filter((r) => this.live(r, now));
    if (busy.length > 0) {
      throw new Error(`InMemoryRedlock.hold: ${busy.join(', ')} already held`);
    }
    const token = `external:${randomBytes(8).toString('hex')}`;
    for (const r of resources) this.entries.set(r, { token, expiresAt: until });
  }

  /** Ends holds made with {@link hold}. */
  free(resources: readonly string[]): boolean {
    let freed = false;
    for (const r of resources) {
      const e = this.entries.get(r);
      if (e && !e.grant) {
        this.entries.delete(r);
        freed = true;
      }
    }
    if (freed) this.announce(resources);
    return freed;
  }

  /** The resource's key vanishes; its holder learns it at once. */
  loseLock(resource: string): Lock | undefined {
    const e = this.live(resource, monotonicNow());
    const lock = e?.grant && lockOfGrant(e.grant);
    if (!lock) return undefined;
    this.entries.delete(resource);
    loseNow(lock, 'it was lost (simulated by the testing module)');
    this.announce([resource]);
    return lock;
  }

  setAvailable(available: boolean): void {
    this.available = available;
    if (available) this.announce([...this.watchers.keys()]);
  }

  holderOf(resource: string): InMemoryHolder | undefined {
    const e = this.live(resource, monotonicNow());
    if (!e) return undefined;
    const lock = e.grant && lockOfGrant(e.grant);
    return lock ? { kind: 'lock', lock } : { kind: 'external' };
  }

  heldResources(): string[] {
    const now = monotonicNow();
    return [...this.entries.keys()].filter((r) => this.live(r, now)).sort();
  }

  reset(): void {
    for (const e of this.entries.values()) {
      const lock = e.grant && lockOfGrant(e.grant);
      if (lock) loseNow(lock, 'the in-memory engine was reset');
    }
    this.entries.clear();
    this.available = true;
    this.announce([...this.watchers.keys()]);
  }

  /** The entry of `resource` if it has not expired; drops it otherwise. */
  private live(resource: string, now: number): Entry | undefined {
    const e = this.entries.get(resource);
    if (e && e.expiresAt <= now) {
      this.entries.delete(resource);
      return undefined;
    }
    return e;
  }

  /** The entry of `resource` if it has not expired, without dropping anything (read-only). */
  private peek(resource: string, now: number): Entry | undefined {
    const e = this.entries.get(resource);
    return e && e.expiresAt > now ? e : undefined;
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
