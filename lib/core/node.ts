import type { Cluster, Redis } from 'ioredis';
import type { NodeOutcome } from './errors';
import { monotonicNow } from './clock';
import type { LuaScript } from './scripts';
import { MARKER_SEED_SCRIPT } from './scripts';
import type { RedlockClient, RedlockLogger } from './settings';
import { redactText } from './redact';
import type { Redactor } from './redact';

/** Result of one request to one master, bounded by a timeout. */
export type NodeReply =
  | { readonly kind: 'reply'; readonly value: unknown; readonly latency: number }
  | { readonly kind: 'error'; readonly error: string; readonly latency: number }
  | { readonly kind: 'timeout'; readonly latency: number };

/** Outcome of one reply as a vote. */
export function outcomeOf(reply: NodeReply): NodeOutcome {
  return reply.kind === 'reply' ? 'ok' : reply.kind;
}

/** `redis://host:port` style name of a client, never including credentials. */
export function describeClient(client: RedlockClient): string {
  if (isCluster(client)) {
    const nodes = client.nodes('master');
    const first = nodes[0]?.options;
    return first
      ? `cluster(${first.host ?? '?'}:${first.port ?? '?'}, ${nodes.length} masters)`
      : 'cluster';
  }
  const o = (client as Redis).options;
  if (o.path) return `unix:${o.path}`;
  return `${o.host ?? 'localhost'}:${o.port ?? 6379}${o.db ? `/${o.db}` : ''}`;
}

/** Whether a client is an ioredis Cluster. */
export function isCluster(client: RedlockClient): client is Cluster {
  return (client as { isCluster?: boolean }).isCluster === true;
}

/** Strips anything that looks like credentials in a URL from an error message (see redact.ts). */
export function redact(message: string): string {
  return redactText(message);
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
 * uptime and the marker is raised to at least "now − uptime" — a restored snapshot cannot make a
 * freshly started process look old.
 */
export class MasterNode {
  /** Redacted address, for votes and logs. */
  readonly name: string;
  /** Whether this master is an ioredis Cluster (no boot marker, keys grouped by slot). */
  readonly cluster: boolean;
  /** `true` when the master persists every write (AOF with fsync always): no quarantine needed. */
  durable = false;

  private verified = false;
  /** Bumped on every disconnect, so that a check begun before it cannot mark the master verified. */
  private epoch = 0;
  private checking = false;
  private readyWait: Promise<void> | undefined;
  private resolveReady: (() => void) | undefined;
  private warned = false;
  private readonly onReady = (): void => void this.verify();
  private readonly onClose = (): void => {
    this.epoch++;
    this.checking = false;
    this.durable = false;
    if (this.verified) {
      this.verified = false;
      this.readyWait = undefined;
    }
  };

  constructor(
    readonly index: number,
    readonly client: RedlockClient,
    private readonly markerKey: string,
    private readonly quarantine: { enabled: boolean; trustAppendFsyncAlways: boolean },
    private readonly logger: RedlockLogger,
    /** Removes credentials (also the known passwords of the engine's clients) from texts. */
    readonly redact: Redactor = redactText,
  ) {
    this.name = describeClient(client);
    this.cluster = isCluster(client);
    if (this.quarantine.enabled && !this.cluster) {
      client.on('ready', this.onReady);
      client.on('close', this.onClose);
      if (client.status === 'ready') void this.verify();
    }
  }

  /** Whether acquire scripts on this master must check the boot marker. */
  get checksMarker(): boolean {
    return this.quarantine.enabled && !this.cluster && !this.durable;
  }

  /** Stops listening to the client's events. The client itself is left alone. */
  detach(): void {
    this.client.off('ready', this.onReady);
    this.client.off('close', this.onClose);
    this.resolveReady?.();
  }

  /**
   * Resolves once the master was checked after its last (re)connect; acquire requests wait for
   * it (within their per-node timeout) so that no vote is counted from an unchecked master —
   * not even one queued while it was disconnected. All requests share one promise.
   */
  ready(): Promise<void> | undefined {
    if (!this.quarantine.enabled || this.cluster || this.verified) return undefined;
    if (!this.readyWait) {
      this.readyWait = new Promise<void>((resolve) => (this.resolveReady = resolve));
    }
    if (this.client.status === 'ready' && !this.checking) void this.verify();
    return this.readyWait;
  }

  private async verify(): Promise<void> {
    const epoch = this.epoch;
    this.checking = true;
    const client = this.client as Redis;
    try {
      const durable = this.quarantine.trustAppendFsyncAlways && (await this.detectDurable(client));
      if (epoch !== this.epoch) return;
      this.durable = durable;
      const info = await client.info('server');
      const uptime = /uptime_in_seconds:(\d+)/.exec(info)?.[1];
      if (uptime === undefined) throw new Error('INFO server has no uptime_in_seconds');
      if (!this.durable) {
        // uptime_in_seconds is rounded, not floored: take a second off to stay conservative.
        const uptimeMs = Math.max(0, Number(uptime) - 1) * 1000;
        await this.evalScript(MARKER_SEED_SCRIPT, [this.markerKey], [String(uptimeMs)]);
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
    this.resolveReady?.();
    this.resolveReady = undefined;
  }

  private async detectDurable(client: Redis): Promise<boolean> {
    try {
      const reply = (await client.config('GET', 'appendfsync')) as string[];
      const aof = (await client.config('GET', 'appendonly')) as string[];
      return reply[1] === 'always' && aof[1] === 'yes';
    } catch {
      return false;
    }
  }

  /**
   * Runs a script with EVALSHA, loading it with EVAL when the master does not know it yet.
   * The EVAL goes out after whatever was sent meanwhile; when `stillWanted()` says the caller
   * has moved on (a release of the same token may already be on the wire), it is not sent at
   * all — a late acquire must never land after its own release.
   */
  evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    stillWanted?: () => boolean,
  ): Promise<unknown> {
    const client = this.client as Redis;
    return client.evalsha(script.sha, keys.length, ...keys, ...args).catch((err: unknown) => {
      if (!errorMessage(err).startsWith('NOSCRIPT')) throw err;
      if (stillWanted && !stillWanted()) throw err;
      return client.eval(script.source, keys.length, ...keys, ...args);
    });
  }

  /**
   * Runs `task` bounded by `timeoutMs` (health checks, subscriptions; lock operations time
   * whole rounds instead). Never rejects; a late answer after the timeout is ignored.
   */
  request(task: () => Promise<unknown>, timeoutMs: number): Promise<NodeReply> {
    const start = monotonicNow();
    return new Promise<NodeReply>((resolve) => {
      const timer = setTimeout(
        () => resolve({ kind: 'timeout', latency: monotonicNow() - start }),
        Math.max(1, timeoutMs),
      );
      task().then(
        (value) => {
          clearTimeout(timer);
          resolve({ kind: 'reply', value, latency: monotonicNow() - start });
        },
        (err: unknown) => {
          clearTimeout(timer);
          resolve({
            kind: 'error',
            error: this.redact(errorMessage(err)),
            latency: monotonicNow() - start,
          });
        },
      );
    });
  }
}

/** Message of an unknown thrown value. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
