/**
 * Hand-over across processes (design and safety argument: lib/core/fair/README.md).
 *
 * A waiting engine parks its next token for a resource on the masters — in the refusal of its
 * single-resource plain attempt by another engine's lock, and in its own ordered yield
 * (fair/acquire-script.ts, fair/release-script.ts) — while it hears the resource's release
 * announcements. A yield that names it (the engine that has waited longest) sets that token on each
 * master where the yield runs, as an acquire would, with a fencing increment and the boot marker's
 * age, and announces it. The engine is granted once a quorum of masters that may vote announced the
 * install: no acquire round after the yield.
 *
 * Validity runs from the first send of the token (`Park.start`): every install ran after the
 * park that it read, which ran after that send, so each key expires no earlier than the key of
 * an acquire sent then would (docs/REDLOCK.md, "N masters", step 4). A master keeps a parked
 * token installable for PARK_LIFE_MS at most, and the engine parks a new token once its current
 * one is older than half of that (a granted install always has most of its ttl left), was
 * granted, or failed — not while it is being installed: it is parked again where it was not.
 *
 * Tokens the engine cannot use are deleted where they were installed: an install of a token it
 * does not know (forgotten once no install of it can come any more, or never parked) on that
 * master only; an install that fewer than a quorum announced within the request timeout, or
 * that the announcements show can no longer reach one (`Installs.news`), on every master (and
 * taken off the park where it is still parked: fair/install-undo.ts `unpark`); a grant with no local
 * waiter to take it (fair/installed.ts) like any lock.
 */
import { withFields } from '../base/fields';
import { monotonicNow } from '../base/clock';
import type { NodeVote } from '../base/errors';
import type { Grant } from '../store';
import { fencingTokensOf, validUntil, validityAfter } from '../quorum/protocol';
import type { FairContext } from './fair-context';
import type { FairGrant } from './fair-store';
import { raiseFences } from '../redis/attempt';
import { newToken } from '../base/token';
import { releaseKeyOn, unpark } from './install-undo';
import { isOut } from './install-park';
import type { Held, Installed, Park } from './install-park';

/**
 * How long (ms) a master keeps a parked token installable (at most half the ttl). Short, so that
 * a process that died while parked leaves an installable token for this long only (an install
 * nobody hears holds the resource for one ttl, as a holder that died would); long enough for
 * the rotation between processes, where a waiting engine parks again at each of its own yields
 * (4 processes × 4 callers: 30–100 ms between the park and the install).
 */
export const PARK_LIFE_MS = 250;

/** The installs of this engine's parked tokens: one current token per resource. */
export class Installs {
  private readonly current = new Map<string, Park>();
  private readonly byToken = new Map<string, Park>();
  /** The tokens of `byToken` per lock key. */
  private readonly byKey = new Map<string, Set<Park>>();
  /** Per lock key with a token of ours parked or gathering: what each master installed there. */
  private readonly held = new Map<string, (Held | undefined)[]>();
  private handler: ((resource: string, grant: Grant | undefined) => void) | undefined;
  private closed = false;

  constructor(private readonly store: FairContext) {}

  /** Where the outcome of each install goes (the engine's local queue). */
  onResult(handler: (resource: string, grant: Grant | undefined) => void): void {
    this.handler = handler;
  }

  /**
   * The token to park for `resource` with `ttl` in a request sent at `start` (monotonic; `wall`
   * the same in wall ms), and for how long a master keeps it installable. The current token is
   * sent again while younger than half that time.
   */
  park(
    resource: string,
    ttl: number,
    start: number,
    wall: number,
  ): { token: string; life: number } {
    const life = Math.min(PARK_LIFE_MS, Math.floor(ttl / 2));
    let p = this.current.get(resource);
    // A gathering token is sent again too: parked anew where it was not installed yet, a later
    // pass there installs it, not a second token of this engine (one pass installing two
    // tokens of the same engine on different masters left neither with a quorum).
    if (!p || !isOut(p) || p.ttl !== ttl || start - p.start > life / 2) {
      this.prune(start);
      this.current.delete(resource);
      p = {
        resource,
        key: this.store.keyOf(resource),
        token: newToken(this.store.engineId),
        ttl,
        life,
        start,
        wallStart: wall,
        heard: new Array<Installed | undefined>(this.store.nodes.length),
        state: 'parked',
        timer: undefined,
      };
      this.current.set(resource, p);
      this.byToken.set(p.token, p);
      let same = this.byKey.get(p.key);
      if (!same) this.byKey.set(p.key, (same = new Set()));
      same.add(p);
    }
    return { token: p.token, life };
  }

  /**
   * `resource`'s queue ended: none of the tokens this engine parked for it may be granted any
   * more — a gathering install fails (deleted everywhere), the others are returned, to be
   * deleted where a yield installed them (fair/unmark-script.ts): once the queue's watch stops,
   * nobody here would hear their installs.
   */
  abandon(resource: string): string[] {
    this.current.delete(resource);
    const tokens: string[] = [];
    for (const p of [...this.parksOf(resource)]) {
      if (p.state === 'gathering') this.fail(p);
      else if (p.state === 'parked') {
        p.state = 'failed';
        tokens.push(p.token);
      }
    }
    this.prune(monotonicNow());
    return tokens;
  }

  /**
   * This engine's attempt that carried the parked `token` was granted (redis/attempt.ts): the
   * token is not needed any more. Taken off the park where it is still parked (the masters that
   * refused the attempt: there another engine's attempt that finds the key free would install it
   * for this engine, which still heads the order), failed where it was installed already (the
   * queue is told as of any failed install: its head is the attempt's own entry, leaving now).
   */
  retire(token: string): void {
    const p = this.byToken.get(token);
    if (p?.state === 'gathering') this.fail(p);
    else if (p?.state === 'parked') this.giveUp(p);
  }

  /** Whether this engine parked a token for `resource` that may still be installed. */
  hasParked(resource: string): boolean {
    for (const p of this.parksOf(resource)) if (isOut(p)) return true;
    return false;
  }

  /** The tokens parked for `resource` not forgotten yet. */
  private parksOf(resource: string): Iterable<Park> {
    return this.byKey.get(this.store.keyOf(resource)) ?? [];
  }

  /**
   * A subscriber connection of master `node` is back: an install announced there meanwhile was
   * heard by nobody. Every parked token is deleted there (compare-and-delete), and the next
   * park of each resource sends a new one.
   */
  resubscribed(node: number): void {
    this.current.clear();
    // What the master installed meanwhile was not heard either: not known any more.
    for (const h of this.held.values()) h[node] = undefined;
    for (const p of this.byToken.values()) {
      if (p.state === 'parked') releaseKeyOn(this.store, node, p.key, p.token);
    }
  }

  /** Master `node` announced the install of `token` at `key` (redis/masters/handoff.ts). */
  heard(key: string, node: number, token: string, fence: number, age: number): void {
    if (this.closed) return;
    const p = this.byToken.get(token);
    if (!p || p.key !== key || p.state === 'failed') {
      // Not usable (forgotten, failed): deleted where it was set.
      releaseKeyOn(this.store, node, key, token);
      return;
    }
    if (p.heard[node] || !(node >= 0 && node < p.heard.length)) return;
    p.heard[node] = { fence, age };
    if (p.state === 'granted') {
      // One more master holds the lock, released with it — unless the lock already ended (its
      // release, or a local take-over, reached that master before the yield did).
      if (p.grant?.ended) releaseKeyOn(this.store, node, key, token);
      return;
    }
    if (p.state === 'parked') {
      // (Still the current token: sent again until granted, failed or old; see `park`.)
      p.state = 'gathering';
      p.timer = setTimeout(() => this.fail(p), this.store.settings.requestTimeout);
    }
    this.decide(p);
  }

  /**
   * Master `node` announced on `key` the deletion of `deleted` and, when given, the install of
   * `installed` (any engine's token). Kept per master while a token of ours for the key is parked
   * or gathering: a master that installed another token holds it until that token's deletion is
   * announced there, and a gathering install of a key split so that no token can reach a quorum
   * fails now ({@link deadlocked}) rather than at the request timeout. (A key that two or more
   * engines' installs split — a pass that the masters ran for different heads, a token parked
   * anew between two of them — was held on every master until each of their timeouts.)
   */
  news(key: string, node: number, deleted: string, installed: string | undefined): void {
    if (this.closed || !(node >= 0 && node < this.store.nodes.length)) return;
    // (Called for every announcement heard: no allocation unless a token of ours is out.)
    const same = this.byKey.get(key);
    let gathering = false;
    let out = false;
    for (const p of same ?? []) {
      gathering ||= p.state === 'gathering';
      out ||= isOut(p);
    }
    if (!out) {
      this.held.delete(key);
      return;
    }
    let h = this.held.get(key);
    if (!h) this.held.set(key, (h = new Array<Held | undefined>(this.store.nodes.length)));
    if (h[node]?.token === deleted) h[node] = undefined;
    if (installed !== undefined) h[node] = { token: installed, at: monotonicNow() };
    const ours = installed === undefined ? undefined : this.byToken.get(installed);
    if (ours) (ours.from ??= new Map()).set(deleted, (ours.from.get(deleted) ?? 0) + 1);
    if (gathering) for (const p of [...(same ?? [])]) if (p.state === 'gathering') this.decide(p);
  }

  /**
   * Whether the installs split `p`'s key so that no token can be granted before one is deleted:
   * even with every master that announcements did not tell of (holding nothing they announced,
   * an attempt's token, or a token whose release installed `p` elsewhere and runs there next),
   * no token holds a quorum. Then every engine's gathering install of the key fails now instead
   * of at its request timeout (their engines see the same). An install on too few masters while
   * another token can still make a quorum waits as before: its masters hold no one up.
   */
  private deadlocked(p: Park): boolean {
    const h = this.held.get(p.key);
    if (!h) return false;
    const now = monotonicNow();
    const counts = new Map<string, number>();
    let open = 0;
    for (const o of h) {
      if (!o || now - o.at >= p.ttl || p.from?.has(o.token)) open++;
      else counts.set(o.token, (counts.get(o.token) ?? 0) + 1);
    }
    return Math.max(0, ...counts.values()) + open < this.store.quorum;
  }

  /**
   * Whether master `i`'s install counts as a vote: not in restart quarantine, its clock trusted by
   * this engine (redis/masters/clock-watch.ts: an install is heard, not answered, so it carries
   * no reading of its own; a master this engine found jumping must not vote through an install
   * either), and with a fencing counter when fencing is on (a yielding engine with other settings
   * may not have sent what this one needs: then the marker's age is -1, the counter 0).
   */
  private counts(i: number, v: Installed): boolean {
    return this.outcomeOf(i, v) === 'ok';
  }

  private outcomeOf(i: number, v: Installed): 'ok' | 'quarantined' | 'error' {
    if (!this.store.clocks.counts(i)) return 'quarantined';
    // The restart quarantine before the counter: a master whose data set is younger than a
    // second (redis/scripts/fencing.ts YOUNG_DATA_SET_MS) sends none, and is in quarantine.
    const restarted =
      this.store.nodes[i].checksMarker &&
      v.age !== -2 &&
      v.age < this.store.settings.quarantine.duration;
    if (restarted) return 'quarantined';
    return this.store.settings.fencing && !(v.fence > 0) ? 'error' : 'ok';
  }

  private decide(p: Park): void {
    const { quorum, settings } = this.store;
    let ok = 0;
    for (let i = 0; i < p.heard.length; i++) {
      const v = p.heard[i];
      if (v && this.counts(i, v)) ok++;
    }
    if (ok < quorum) {
      if (p.state === 'gathering' && this.deadlocked(p)) this.fail(p);
      return;
    }
    clearTimeout(p.timer);
    p.timer = undefined;
    p.state = 'granted';
    if (this.current.get(p.resource) === p) this.current.delete(p.resource); // used
    if (validityAfter(p.ttl, p.start, monotonicNow(), settings.driftFactor) <= 0) {
      this.fail(p, true);
      return;
    }
    if (!settings.fencing) {
      this.grant(p, []);
      return;
    }
    const counters = p.heard.map((v, i) => (v && this.counts(i, v) ? [v.fence] : undefined));
    const found = fencingTokensOf(counters, [p.resource], quorum);
    if (found.settled) {
      this.grant(p, found.tokens);
      return;
    }
    // Fewer than a quorum hold the token: raised first, as for an acquire.
    const deadline = validUntil(p.start, p.ttl, settings.driftFactor);
    raiseFences(this.store, [p.resource], found.tokens, (i) => !found.holds(counters[i]), deadline)
      .then(({ ok }) => {
        const left = validityAfter(p.ttl, p.start, monotonicNow(), settings.driftFactor);
        if (ok >= quorum && left > 0 && !this.closed) this.grant(p, found.tokens);
        else this.fail(p, true);
      })
      .catch(() => this.fail(p, true));
  }

  private grant(p: Park, fencingTokens: readonly number[]): void {
    const now = monotonicNow();
    const votes: NodeVote[] = this.store.nodes.map((n, i) => {
      const v = p.heard[i];
      const outcome = v ? this.outcomeOf(i, v) : 'timeout';
      const vote: NodeVote = { node: i, name: n.name, outcome, latency: now - p.start };
      return outcome === 'error'
        ? withFields(vote, { error: 'installed without a fencing counter' })
        : vote;
    });
    const grant: FairGrant = {
      resources: [p.resource],
      token: p.token,
      ttl: p.ttl,
      start: p.start,
      wallStart: p.wallStart,
      votes,
      fencingTokens,
      ended: false,
      installedBy: installer(p),
    };
    p.grant = grant;
    if (this.handler) this.handler(p.resource, grant);
    else {
      grant.ended = true;
      void this.store.release(grant, false);
    }
  }

  /**
   * Too few masters installed `p` in time, or can still (`decide`), or no validity was left:
   * deleted everywhere.
   */
  private fail(p: Park, granted = false): void {
    if (p.state === 'failed' || (p.state === 'granted' && !granted)) return;
    this.giveUp(p);
    if (!this.closed) {
      // Announced as the clean-up of a failed attempt (which it is): the waiters it wakes
      // attempt spread over a few ms instead of all at once into the next split.
      this.store.ignoreOwn([p.resource], p.token, true);
      void this.store.releaseKeys([p.resource], p.token, { announce: 'cleanup' });
    }
    this.handler?.(p.resource, undefined);
  }

  /**
   * `p` may not be installed any more: failed, no longer the current token, and taken off the
   * park where it is still parked (fair/install-undo.ts `unpark`).
   */
  private giveUp(p: Park): void {
    clearTimeout(p.timer);
    p.timer = undefined;
    p.state = 'failed';
    if (this.current.get(p.resource) === p) this.current.delete(p.resource);
    if (!this.closed) unpark(this.store, p.resource, p.token);
  }

  /**
   * Forgets the tokens whose installs can no longer come: a token is sent until `life / 2`
   * after its first send, and a master installs it at most `life` after it was parked there.
   * An announcement of a forgotten token is deleted where it was set (`heard`).
   */
  private prune(now: number): void {
    const late = this.store.settings.requestTimeout;
    for (const [token, p] of this.byToken) {
      if (p.state === 'gathering' || now <= p.start + 2 * p.life + late) continue;
      this.byToken.delete(token);
      const same = this.byKey.get(p.key);
      same?.delete(p);
      if (same?.size === 0) {
        this.byKey.delete(p.key);
        this.held.delete(p.key);
      }
      if (this.current.get(p.resource) === p) this.current.delete(p.resource);
    }
  }

  /** Stops the gathering timers; nothing more is sent. */
  close(): void {
    this.closed = true;
    for (const p of this.byToken.values()) clearTimeout(p.timer);
    this.byToken.clear();
    this.byKey.clear();
    this.current.clear();
    this.held.clear();
  }
}

/** The token whose release installed `p` on the most masters (FairGrant.installedBy), if any. */
function installer(p: Park): string | undefined {
  let best: string | undefined;
  let most = 0;
  for (const [token, n] of p.from ?? []) {
    if (n > most) [best, most] = [token, n];
  }
  return best;
}
