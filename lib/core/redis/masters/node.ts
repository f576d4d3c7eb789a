import { markerRunKey } from '../../base/keys';
import type { Writable } from 'node:stream';
import { afterPendingIo, monotonicNow } from '../../base/clock';
import { errorMessage } from '../../base/validate';
import { connectionOf } from '../connection/adapt';
import type { Connection } from '../connection/connection';
import { evalScript, evalScriptInto, loadScripts } from '../scripts/lua';
import type { LuaScript } from '../scripts/lua';
import { MARKER_READ_SCRIPT, MARKER_SEED_SCRIPT } from '../scripts/marker';
import type { RedlockClient, RedlockLogger } from '../../base/settings';
import { redactText } from '../../base/redact';
import type { Redactor } from '../../base/redact';

/** Result of one request to one master, bounded by a timeout. */
export type NodeReply =
  | { readonly kind: 'reply'; readonly value: unknown; readonly latency: number }
  | { readonly kind: 'error'; readonly error: string; readonly latency: number }
  | { readonly kind: 'timeout'; readonly latency: number };

/**
 * Why a master's boot marker was (re)seeded by its post-connect check (see {@link MasterNode}):
 * `new` — no engine had seen its data set (no marker: a new master, or one that restarted without
 * its data or was flushed); `restarted` — its process changed (another `run_id`) since the marker
 * was written, e.g. a restart from a snapshot; `known` — the same process as at the last check.
 */
export type SeedCause = 'new' | 'restarted' | 'known';

/** What the post-connect check found: the boot marker's age (server clock, ms) and why. */
export interface SeedResult {
  readonly age: number;
  readonly cause: SeedCause;
}

/**
 * One Redis master: runs scripts with a per-request timeout (EVALSHA with NOSCRIPT fallback) and
 * keeps the restart-quarantine state of the master.
 *
 * Restart quarantine: a master that lost its data (restart without persistence, restart from an
 * old snapshot, FLUSHALL) holds a *boot marker* key whose value is its data set's birth time on
 * the server's clock. The acquire script reads it (no extra round trip) and reports the marker's
 * age; votes from a master whose marker is younger than the quarantine duration do not count.
 * After every (re)connect, before the master is used for acquiring, `INFO server` tells its
 * `run_id` and uptime; the first check of a process raises the marker to at least
 * "now − uptime" and records the `run_id` next to it — a restored snapshot cannot make a freshly
 * started process look old. Later checks of the same process leave the marker alone, so the
 * whole-second uptime can never push a master that left quarantine back into it.
 */
export class MasterNode {
  /** Redacted address, for votes and logs. */
  readonly name: string;
  /** Whether this master is a Cluster (no boot marker, keys grouped by slot). */
  readonly cluster: boolean;
  /** The client as the engine talks to it (redis/connection/connection.ts). */
  readonly connection: Connection;
  /** `true` when the master persists every write (AOF with fsync always): no quarantine needed. */
  durable = false;

  private verified = false;
  /** Bumped on every disconnect, so that a check begun before it cannot mark the master verified. */
  private epoch = 0;
  private checking = false;
  /** Requests waiting for the check: resolved once it is done, rejected when the connection closes. */
  private waiting:
    { promise: Promise<void>; resolve(): void; reject(err: Error): void } | undefined;
  private warned = false;
  /**
   * The last error the client reported while (re)connecting (ECONNREFUSED, WRONGPASS, NOAUTH,
   * ...), redacted; cleared when it is ready. Requests that fail while it is not connected report
   * it instead of the client's "Stream isn't writeable ..." (see {@link request}).
   */
  private connectionError: string | undefined;
  /**
   * After every (re)connect: the post-connect check (restart quarantine), which loads the
   * engine's scripts too, or — when there is none — just the scripts (redis/scripts/lua.ts,
   * loadScripts). Written at once, before any command the engine sends on the new connection.
   */
  private readonly onReady = (): void => {
    void (this.quarantine.enabled ? this.verify() : loadScripts(this.connection));
    this.afterConnect?.(this);
  };
  /** Told after every (re)connect: the assumption checks (redis/masters/master-checks.ts). */
  afterConnect: ((node: MasterNode) => void) | undefined;
  private readonly onClose = (): void => {
    this.epoch++;
    this.birth = undefined;
    this.checking = false;
    this.durable = false;
    this.verified = false;
    // A request waiting for the check would have been on this connection: it fails as it would
    // have without quarantine (never sent, so nothing to clean up), instead of timing out.
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.reject(new Error('Connection is closed.'));
  };

  constructor(
    readonly index: number,
    readonly client: RedlockClient,
    private readonly markerKey: string,
    private readonly quarantine: {
      enabled: boolean;
      trustAppendFsyncAlways: boolean;
      /** ms a marker must have lived before the master's votes count (0 when not given). */
      duration?: number;
    },
    private readonly logger: RedlockLogger,
    /** Removes credentials (also the known passwords of the engine's clients) from texts. */
    readonly redact: Redactor = redactText,
    /** Told the outcome of every successful post-connect check (quarantine notices). */
    private readonly onSeeded?: (node: MasterNode, result: SeedResult) => void,
  ) {
    this.connection = connectionOf(client);
    this.name = this.connection.address;
    this.cluster = this.connection.cluster;
    if (!this.cluster) {
      MasterNode.listen(this.connection, this);
      if (this.connection.isReady) this.onReady();
    }
  }

  /**
   * One 'ready' and one 'close' listener per client, shared by every node (engine) on it: any
   * number of engines over the same clients adds no listener per engine (no
   * MaxListenersExceededWarning from 11 engines on one client).
   */
  private static readonly listeners = new WeakMap<
    Connection,
    {
      nodes: Set<MasterNode>;
      ready: () => void;
      close: () => void;
      error: (err: unknown) => void;
    }
  >();

  private static listen(client: Connection, node: MasterNode): void {
    let l = MasterNode.listeners.get(client);
    if (!l) {
      const nodes = new Set<MasterNode>();
      l = {
        nodes,
        ready: () =>
          nodes.forEach((n) => {
            n.connectionError = undefined;
            n.onReady();
          }),
        close: () => nodes.forEach((n) => n.quarantine.enabled && n.onClose()),
        error: (err: unknown) => {
          nodes.forEach((n) => (n.connectionError = n.redact(errorMessage(err))));
          // Listening must not hide errors: with no listener of its owner, ioredis prints them
          // (and node-redis throws them). (Redacted: the text is ours to print now.)
          const [first] = nodes;
          if (client.errorListeners() === 1 && err instanceof Error && first) {
            console.error(
              `[${client.library}] Unhandled error event:`,
              first.redact(err.stack ?? err.message),
            );
          }
        },
      };
      client.on('ready', l.ready);
      client.on('close', l.close);
      client.on('error', l.error);
      MasterNode.listeners.set(client, l);
    }
    l.nodes.add(node);
  }

  private static unlisten(client: Connection, node: MasterNode): void {
    const l = MasterNode.listeners.get(client);
    if (!l?.nodes.delete(node) || l.nodes.size > 0) return;
    client.off('ready', l.ready);
    client.off('close', l.close);
    client.off('error', l.error);
    MasterNode.listeners.delete(client);
  }

  /** The boot marker's value as last learnt, and when (monotonic) it is older than the quarantine. */
  private birth: string | undefined;
  private birthOldAt = Infinity;
  private relearning = false;

  /**
   * The boot marker's value when it is known to be older than the quarantine — learnt from this
   * connection's post-connect check (or a re-read), and past the quarantine by the local clock
   * since (with 1% + 10 ms of margin for clocks that run at different rates). Acquire scripts
   * compare it instead of reading the server's clock (bootMarkerAge in redis/scripts/lua.ts); any other
   * marker value takes the full path. Forgotten on every disconnect.
   */
  get knownBirth(): string | undefined {
    return this.birth !== undefined && monotonicNow() >= this.birthOldAt ? this.birth : undefined;
  }

  /**
   * Called when a script checked this master's marker fully although {@link knownBirth} was
   * given: the marker moved (a flush re-seeded by another engine, a re-seed by another process's
   * check). Forgets the value and reads the marker again (read-only, in the background); the
   * full check stays in place until then.
   */
  markerMoved(): void {
    if (this.birth === undefined) return;
    this.birth = undefined;
    if (this.relearning) return;
    this.relearning = true;
    const epoch = this.epoch;
    this.evalScript(MARKER_READ_SCRIPT, [this.markerKey], [])
      .then((reply) => {
        const [age, birth] = reply as [number, string];
        if (epoch === this.epoch && age >= 0) this.learnBirth(birth, age);
      })
      .catch(() => undefined) // the full check stays in place
      .finally(() => (this.relearning = false));
  }

  private learnBirth(birth: string, age: number): void {
    if (!/^\d+$/.test(birth)) return;
    const left = Math.max(0, (this.quarantine.duration ?? 0) - age);
    this.birth = birth;
    this.birthOldAt = monotonicNow() + left * 1.01 + 10;
  }

  /** Whether acquire scripts on this master must check the boot marker. */
  get checksMarker(): boolean {
    return this.quarantine.enabled && !this.cluster && !this.durable;
  }

  /** Stops listening to the client's events. The client itself is left alone. */
  detach(): void {
    MasterNode.unlisten(this.connection, this);
    this.waiting?.resolve();
    this.waiting = undefined;
  }

  /**
   * Resolves once the master was checked after its last (re)connect; acquire requests wait for
   * it (within their per-node timeout) so that no vote is counted from an unchecked master —
   * not even one queued while it was disconnected. All requests share one promise.
   *
   * Rejects, like the request itself would have without quarantine, when the master cannot be
   * reached: when the connection closes while waiting, and — while it is not connected — with
   * the error of a PING sent now (the same fate as any command: "Connection is closed.", "Stream
   * isn't writeable ...", or queued until the reconnect). A down master is thus voted `error`
   * at once, never `timeout` after the whole per-node timeout.
   */
  ready(): Promise<void> | undefined {
    if (!this.quarantine.enabled || this.cluster || this.verified) return undefined;
    if (!this.waiting) {
      let resolve!: () => void;
      let reject!: (err: Error) => void;
      const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
      promise.catch(() => undefined); // rejected with nobody waiting: not an unhandled rejection
      this.waiting = { promise, resolve, reject };
    }
    const waiting = this.waiting.promise;
    if (this.connection.isReady) {
      if (!this.checking) void this.verify();
      return waiting;
    }
    // Read-only, harmless even when it waits in the client's offline queue until the reconnect.
    const probe = this.connection.ping().then(
      () => waiting, // reconnected meanwhile: the check follows
      (err: unknown) => Promise.reject(err instanceof Error ? err : new Error(String(err))),
    );
    return Promise.race([waiting, probe]);
  }

  private async verify(): Promise<void> {
    const epoch = this.epoch;
    this.checking = true;
    const client = this.connection;
    let seeded: SeedResult | undefined;
    try {
      // Written first, so every script the engine sends after the check finds its script loaded.
      const loaded = loadScripts(client);
      const durable = this.quarantine.trustAppendFsyncAlways && (await this.detectDurable(client));
      await loaded;
      if (epoch !== this.epoch) return;
      this.durable = durable;
      const info = await client.info('server');
      const uptime = /uptime_in_seconds:(\d+)/.exec(info)?.[1];
      const runId = /run_id:([0-9a-f]+)/.exec(info)?.[1];
      if (uptime === undefined) throw new Error('INFO server has no uptime_in_seconds');
      if (!this.durable) {
        // uptime_in_seconds is rounded, not floored: take a second off to stay conservative.
        const uptimeMs = Math.max(0, Number(uptime) - 1) * 1000;
        const reply = (await this.evalScript(
          MARKER_SEED_SCRIPT,
          [this.markerKey, markerRunKey(this.markerKey)],
          [String(uptimeMs), runId ?? ''],
        )) as [number, number, string];
        seeded = { age: Number(reply[0]), cause: SEED_CAUSES[Number(reply[1])] ?? 'new' };
        if (epoch === this.epoch) this.learnBirth(String(reply[2]), seeded.age);
      }
      this.warned = false;
    } catch (err) {
      if (epoch !== this.epoch) return; // disconnected meanwhile: checked again on 'ready'
      // Without INFO, the boot marker alone still detects a restart without persistence.
      if (!this.warned) {
        this.warned = true;
        this.logger.warn(
          `Redlock: could not check master ${this.name} for a restart (${this.redact(errorMessage(err))}); relying on its boot marker`,
        );
      }
    }
    if (epoch !== this.epoch) return;
    this.checking = false;
    this.verified = true;
    if (seeded) this.onSeeded?.(this, seeded);
    this.waiting?.resolve();
    this.waiting = undefined;
  }

  private async detectDurable(client: Connection): Promise<boolean> {
    try {
      const fsync = await client.configGet('appendfsync');
      const aof = await client.configGet('appendonly');
      return fsync === 'always' && aof === 'yes';
    } catch {
      return false;
    }
  }

  /**
   * Runs a script on this master (EVALSHA, EVAL on NOSCRIPT: see redis/scripts/lua.ts), with its
   * reply turned into the result by `onReply` in the same continuation when given. Every call of
   * one tick leaves in one socket write (see {@link coalesce}).
   */
  evalScript<T = unknown>(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    stillWanted?: () => boolean,
    onReply?: (reply: unknown) => T | PromiseLike<T>,
  ): Promise<T> {
    this.coalesce();
    return evalScript(
      this.connection,
      script,
      keys,
      args,
      stillWanted,
      this.coalesceFallback,
      onReply,
    );
  }

  /**
   * {@link evalScript} delivering its outcome to `onReply` or `onError` instead of a promise
   * (redis/scripts/lua.ts `evalScriptInto`). `onReply` must not throw.
   */
  evalScriptInto(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    stillWanted: (() => boolean) | undefined,
    onReply: (reply: unknown) => void,
    onError: (err: unknown) => void,
  ): void {
    this.coalesce();
    evalScriptInto(
      this.connection,
      script,
      keys,
      args,
      stillWanted,
      this.coalesceFallback,
      onReply,
      onError,
    );
  }

  /**
   * TIME on this master (the clock check, redis/masters/clock-watch.ts), in the tick's one write
   * with the script calls (see {@link coalesce}).
   */
  time(): Promise<number> {
    this.coalesce();
    return this.connection.time();
  }

  /** The NOSCRIPT fallbacks of one tick leave in one write as well (redis/scripts/lua.ts). */
  private readonly coalesceFallback = (): void => this.coalesce();

  /** Whether this master already got a script call in the current tick. */
  private inTick = false;
  /** The socket corked in the current tick, if any. */
  private corked: Writable | undefined;
  /** Ends this master's tick (called by {@link endTicks}): uncorks what the tick corked. */
  endTick(): void {
    this.inTick = false;
    const stream = this.corked;
    this.corked = undefined;
    stream?.uncork();
  }

  /**
   * One write per master per tick. The first script call of a tick is written
   * at once, as without coalescing (a lone call pays nothing but its place in the one
   * `process.nextTick` of the tick, shared by every master: {@link endTicks}); a
   * second call in the same tick corks the connection's socket, and the end of the tick uncorks
   * it, so every further acquire, release and extension of that tick leaves in one `writev`
   * instead of one syscall each. The tick ends after the promise continuations queued during it,
   * so commands sent from replies that arrived together (64 callers answered by one socket read)
   * go out together too. No timer, no `setImmediate` (unlike ioredis' `enableAutoPipelining`).
   * The client still writes and queues each command itself, in order, so replies, errors and the
   * NOSCRIPT fallback are unchanged. Only a socket the connection offers is corked
   * (`Connection.corkable`: a connected standalone ioredis client; a Cluster routes per slot, an
   * offline client queues and writes on reconnect, node-redis writes the commands issued
   * before its `setImmediate` together by itself).
   */
  private coalesce(): void {
    if (this.corked || this.cluster) return;
    if (!this.inTick) {
      this.inTick = true;
      if (tickMasters.push(this) === 1) process.nextTick(endTicks);
      return;
    }
    const stream = this.connection.corkable();
    if (!stream) return;
    stream.cork();
    this.corked = stream;
  }

  /**
   * The redacted text of a request's error; while the client is not connected, the last error it
   * saw connecting (the cause), not the error of the command it could not send.
   */
  private failureOf(err: unknown): string {
    const message = this.redact(errorMessage(err));
    if (this.cluster || this.connection.isReady || this.connectionError === undefined) {
      return message;
    }
    return `not connected: ${this.connectionError}`;
  }

  /**
   * Runs `task` bounded by `timeoutMs` (health checks, subscriptions; lock operations time
   * whole rounds instead). Never rejects; a late answer after the timeout is ignored.
   */
  request(task: () => Promise<unknown>, timeoutMs: number): Promise<NodeReply> {
    const start = monotonicNow();
    return new Promise<NodeReply>((resolve) => {
      // Replies already in the socket are read first (base/clock.ts, afterPendingIo): a resolved
      // answer wins over this timeout.
      const timer = setTimeout(
        () => afterPendingIo(() => resolve({ kind: 'timeout', latency: monotonicNow() - start })),
        Math.max(1, timeoutMs),
      );
      task().then(
        (value) => {
          clearTimeout(timer);
          resolve({ kind: 'reply', value, latency: monotonicNow() - start });
        },
        (err: unknown) => {
          clearTimeout(timer);
          resolve({ kind: 'error', error: this.failureOf(err), latency: monotonicNow() - start });
        },
      );
    });
  }
}

/**
 * The masters that got a script call in the current tick, of every engine: one `process.nextTick`
 * ends the tick for all of them ({@link MasterNode.coalesce}) instead of one per master — a round
 * sends to every master in the same tick.
 */
let tickMasters: MasterNode[] = [];

function endTicks(): void {
  const nodes = tickMasters;
  tickMasters = [];
  for (const node of nodes) node.endTick();
}

/** Causes in the order the marker-seed script numbers them. */
const SEED_CAUSES: readonly SeedCause[] = ['known', 'new', 'restarted'];
