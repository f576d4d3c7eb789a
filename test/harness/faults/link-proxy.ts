/**
 * Per-link network faults for the fault harness: a TCP proxy on 127.0.0.1 in front of one Redis
 * port, for one client's link to one master, whose mode changes while connections are open.
 *
 * Modes ({@link LinkMode}):
 *
 * - `pass`: bytes go through as they come.
 * - `delay`: each direction is delayed by its own number of ms, order kept (a chunk leaves at
 *   max(arrival + delay, the previous chunk's departure), so lowering a delay never reorders).
 * - `reset`: every open connection is closed with a TCP RST (both ends: the client sees
 *   ECONNRESET), and so is every new one, right after it is accepted.
 * - `refuse`: the listening socket is closed, so connects fail with ECONNREFUSED; open
 *   connections are reset too (a port that refuses connects normally belongs to a dead process),
 *   or kept with `existing: 'keep'` (a firewall that rejects new connections only). The proxy
 *   listens again on the same port when the mode changes back.
 * - `blackhole`: a partition. Connections are still accepted, but nothing is forwarded in the
 *   blocked direction(s) (`both`, or asymmetric: `up` = client → master only, `down` = master →
 *   client only), for open connections as well as new ones. With `bytes: 'hold'` (the default)
 *   the blocked bytes are held, as TCP retransmission holds them through a short partition, and
 *   delivered in order when the link heals: a command sent during the partition runs late on the
 *   master. With `bytes: 'drop'` they are lost for good; a byte stream with a hole in it cannot go
 *   on (replies would be paired with the wrong commands), so when the link heals every connection
 *   that lost bytes is reset, as TCP gives up on a connection after a long partition.
 *
 * The proxy listens on a port below the kernel's ephemeral range: after `refuse` it must get the
 * same port back, and a port in that range could meanwhile be taken by the local end of some
 * outgoing connection or by another test's listen(0) (freePort). Backpressure is not propagated
 * (the tests' traffic is small).
 *
 * {@link LinkMatrix} builds one proxy per (client, master) link and partitions a client from a
 * set of masters. `close()` of either destroys every socket and clears every timer.
 */
import { readFileSync } from 'node:fs';
import { type Server, type Socket, connect, createServer } from 'node:net';
import Redis, { type RedisOptions } from 'ioredis';
import { closeClient } from '../redis-masters';

/** Which way bytes flow: `up` client → master, `down` master → client. */
export type Direction = 'up' | 'down' | 'both';

/** What a link does; see the file's header. */
export type LinkMode =
  | { kind: 'pass' }
  | { kind: 'delay'; up: number; down: number }
  | { kind: 'reset' }
  | { kind: 'refuse'; existing: 'reset' | 'keep' }
  | { kind: 'blackhole'; direction: Direction; bytes: 'hold' | 'drop' };

/** What one direction of every connection does under a mode. */
interface Flow {
  delay: number;
  block: 'none' | 'hold' | 'drop';
}

function flowOf(mode: LinkMode, direction: 'up' | 'down'): Flow {
  switch (mode.kind) {
    case 'delay':
      return { delay: mode[direction], block: 'none' };
    case 'blackhole':
      return {
        delay: 0,
        block: mode.direction === 'both' || mode.direction === direction ? mode.bytes : 'none',
      };
    default:
      return { delay: 0, block: 'none' };
  }
}

/** One direction of one connection: a FIFO of chunks with their departure times. */
class Pipe {
  private readonly queue: { at: number; chunk: Buffer }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private lastAt = 0;
  private paused = false;
  /** The source has closed: once the queue is delivered, the connection ends. */
  private sourceGone = false;

  constructor(
    private readonly source: Socket,
    private readonly to: Socket,
    private readonly flow: () => Flow,
    private readonly lost: () => void,
    private readonly ended: () => void,
  ) {}

  get pending(): boolean {
    return this.timer !== undefined;
  }

  push(chunk: Buffer): void {
    const { delay, block } = this.flow();
    if (block === 'drop') {
      this.lost();
      return;
    }
    const at = Math.max(Date.now() + delay, this.lastAt);
    this.lastAt = at;
    // The common case (nothing queued, no delay, not held) writes at once, without a timer.
    if (at <= Date.now() && this.queue.length === 0 && block === 'none') {
      if (!this.to.destroyed) this.to.write(chunk);
      return;
    }
    this.queue.push({ at, chunk });
    this.schedule();
  }

  /** The source closed (FIN, RST or destroy). */
  sourceClosed(): void {
    this.sourceGone = true;
    this.maybeEnd();
  }

  /** Applies the current flow: pauses or resumes the source, drops or schedules the queue. */
  update(): void {
    const { block } = this.flow();
    if (block === 'hold') {
      // Not reading makes the sender's bytes wait in the kernel buffers, as in a partition.
      if (!this.paused && !this.source.destroyed) this.source.pause();
      this.paused = true;
      this.clearTimer();
      return;
    }
    if (this.paused) {
      this.paused = false;
      if (!this.source.destroyed) this.source.resume();
    }
    if (block === 'drop') {
      this.clearTimer();
      if (this.queue.length > 0) {
        this.queue.length = 0;
        this.lost();
      }
      return;
    }
    this.schedule();
    this.maybeEnd();
  }

  stop(): void {
    this.clearTimer();
    this.queue.length = 0;
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Ends the connection once a closed source's bytes are delivered (not while blocked). */
  private maybeEnd(): void {
    if (this.sourceGone && this.queue.length === 0 && this.flow().block === 'none') this.ended();
  }

  private schedule(): void {
    if (this.timer || this.queue.length === 0 || this.flow().block !== 'none') return;
    const wait = Math.max(0, this.queue[0].at - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const now = Date.now();
      while (this.queue.length > 0 && this.queue[0].at <= now) {
        const { chunk } = this.queue.shift()!;
        if (!this.to.destroyed) this.to.write(chunk);
      }
      this.schedule();
      this.maybeEnd();
    }, wait);
  }
}

/** One proxied connection: the client's socket, the socket to Redis, a pipe each way. */
class Link {
  readonly up: Pipe;
  readonly down: Pipe;
  /** Bytes were dropped: the stream cannot go on once the link heals. */
  lostBytes = false;
  private done = false;

  constructor(
    readonly client: Socket,
    readonly upstream: Socket,
    flow: (direction: 'up' | 'down') => Flow,
    private readonly onClosed: (link: Link) => void,
  ) {
    const lost = (): void => {
      this.lostBytes = true;
    };
    const end = (): void => this.close(false);
    this.up = new Pipe(client, upstream, () => flow('up'), lost, end);
    this.down = new Pipe(upstream, client, () => flow('down'), lost, end);
    client.on('data', (d: Buffer) => this.up.push(d));
    upstream.on('data', (d: Buffer) => this.down.push(d));
    for (const s of [client, upstream]) {
      s.setNoDelay(true);
      // Errors (ECONNRESET, ECONNREFUSED from a dead master) end in 'close', handled below.
      s.on('error', () => undefined);
    }
    client.once('close', () => this.up.sourceClosed());
    upstream.once('close', () => this.down.sourceClosed());
  }

  get sockets(): Socket[] {
    return [this.client, this.upstream];
  }

  update(): void {
    this.up.update();
    this.down.update();
  }

  /** Destroys both ends: with a TCP RST when `reset`, else a normal close. */
  close(reset: boolean): void {
    if (this.done) return;
    this.done = true;
    this.up.stop();
    this.down.stop();
    for (const s of this.sockets) {
      if (s.destroyed) continue;
      // resetAndDestroy sends the RST once a still-connecting socket connects.
      if (reset) s.resetAndDestroy();
      else s.destroy();
    }
    this.onClosed(this);
  }
}

/** The kernel's ephemeral port range (Linux), or undefined where it cannot be read. */
function ephemeralRange(): [number, number] | undefined {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    return Number.isInteger(low) && Number.isInteger(high) ? [low, high] : undefined;
  } catch {
    return undefined;
  }
}

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', onError);
      resolve();
    });
  });
}

function isAddressInUse(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === 'EADDRINUSE';
}

/** A fault-injecting TCP proxy to `127.0.0.1:targetPort`. */
export class LinkProxy {
  private readonly links = new Set<Link>();
  /** Servers closed by `refuse` whose close callbacks have not run yet. */
  private readonly closing = new Set<Promise<void>>();
  private server: Server | undefined;
  private current: LinkMode = { kind: 'pass' };
  private changes: Promise<void> = Promise.resolve();
  private closed = false;

  private constructor(
    readonly targetPort: number,
    /** The proxy's port on 127.0.0.1; the same for its whole life, across `refuse`. */
    readonly port: number,
  ) {}

  /** Starts a proxy (in `pass` mode unless told otherwise) on a free loopback port. */
  static async start(targetPort: number, mode: LinkMode = { kind: 'pass' }): Promise<LinkProxy> {
    const range = ephemeralRange();
    // Below the ephemeral range when there is room (see the file's header), else anywhere.
    const low = 10_000;
    const below = range && range[0] - 1 > low ? range[0] - 1 : undefined;
    for (let attempt = 1; ; attempt++) {
      const port = below && attempt <= 50 ? low + Math.floor(Math.random() * (below - low)) : 0;
      const server = createServer();
      try {
        await listen(server, port);
      } catch (err) {
        if (isAddressInUse(err) && port !== 0) continue;
        throw err;
      }
      const address = server.address();
      if (typeof address !== 'object' || !address) throw new Error('proxy has no address');
      const proxy = new LinkProxy(targetPort, address.port);
      proxy.adopt(server);
      await proxy.setMode(mode);
      return proxy;
    }
  }

  /** The mode last applied (or being applied). */
  get mode(): LinkMode {
    return this.current;
  }

  /** Whether the proxy is listening (false in `refuse` and after close). */
  get listening(): boolean {
    return this.server !== undefined;
  }

  /** Open sockets (both ends of each connection), connections, and armed timers. */
  get stats(): { connections: number; sockets: number; timers: number } {
    let sockets = 0;
    let timers = 0;
    for (const l of this.links) {
      for (const s of l.sockets) if (!s.destroyed) sockets++;
      if (l.up.pending) timers++;
      if (l.down.pending) timers++;
    }
    return { connections: this.links.size, sockets, timers };
  }

  /**
   * Switches to `mode`, for open connections and new ones. Changes apply in the order they are
   * asked; the promise resolves once this one is in effect (for `refuse`: the port refuses).
   */
  setMode(mode: LinkMode): Promise<void> {
    const next = this.changes.then(() => this.apply(mode));
    // A failed change (the port was taken during `refuse`) must not block the later ones.
    this.changes = next.catch(() => undefined);
    return next;
  }

  pass(): Promise<void> {
    return this.setMode({ kind: 'pass' });
  }

  delay(up: number, down = up): Promise<void> {
    return this.setMode({ kind: 'delay', up, down });
  }

  reset(): Promise<void> {
    return this.setMode({ kind: 'reset' });
  }

  refuse(existing: 'reset' | 'keep' = 'reset'): Promise<void> {
    return this.setMode({ kind: 'refuse', existing });
  }

  blackhole(direction: Direction = 'both', bytes: 'hold' | 'drop' = 'hold'): Promise<void> {
    return this.setMode({ kind: 'blackhole', direction, bytes });
  }

  /** Stops listening, destroys every connection and clears every timer. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.changes;
    const server = this.server;
    this.server = undefined;
    if (server) this.closing.add(this.closeServer(server));
    const sockets = [...this.links].flatMap((l) => l.sockets);
    for (const l of [...this.links]) l.close(false);
    await Promise.all([
      ...this.closing,
      ...sockets.map((s) =>
        s.closed ? Promise.resolve() : new Promise<void>((r) => s.once('close', () => r())),
      ),
    ]);
  }

  private async apply(mode: LinkMode): Promise<void> {
    if (this.closed) throw new Error('link proxy is closed');
    if (mode.kind === 'refuse') {
      const server = this.server;
      this.server = undefined;
      // The listening socket closes at once; the callback waits for the server's connections.
      if (server) this.closing.add(this.closeServer(server));
    } else if (!this.server) {
      await this.relisten(); // on failure the previous mode stays
    }
    this.current = mode;
    const resetAll = mode.kind === 'reset' || (mode.kind === 'refuse' && mode.existing === 'reset');
    const drops = flowOf(mode, 'up').block === 'drop' || flowOf(mode, 'down').block === 'drop';
    for (const l of [...this.links]) {
      // A healed link whose bytes were dropped cannot go on: see the file's header.
      if (resetAll || (l.lostBytes && !drops)) l.close(true);
      else l.update(); // kept connections of `refuse` flow as in `pass`
    }
  }

  private closeServer(server: Server): Promise<void> {
    const done = new Promise<void>((resolve) => server.close(() => resolve()));
    const tracked = done.then(() => {
      this.closing.delete(tracked);
    });
    return tracked;
  }

  /** Listens again on {@link port}; retried for a while if something holds it meanwhile. */
  private async relisten(): Promise<void> {
    const deadline = Date.now() + 2000;
    for (;;) {
      const server = createServer();
      try {
        await listen(server, this.port);
        this.adopt(server);
        return;
      } catch (err) {
        if (!isAddressInUse(err) || Date.now() > deadline)
          throw new Error(`link proxy could not listen on port ${this.port} again: ${String(err)}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  }

  private adopt(server: Server): void {
    this.server = server;
    server.on('connection', (client) => this.accept(client));
    // An error after listening (none expected on loopback) must not crash the test process.
    server.on('error', () => undefined);
  }

  private accept(client: Socket): void {
    if (this.closed || this.current.kind === 'refuse') {
      client.on('error', () => undefined);
      client.destroy();
      return;
    }
    if (this.current.kind === 'reset') {
      client.on('error', () => undefined);
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(this.targetPort, '127.0.0.1');
    const link = new Link(
      client,
      upstream,
      (direction) => flowOf(this.current, direction),
      (l) => this.links.delete(l),
    );
    this.links.add(link);
    link.update();
  }
}

/**
 * Closes an ioredis client, at once when it has no connection. A client between two reconnect
 * attempts (`reconnecting`, the usual state behind a link that resets or refuses) has no socket,
 * only a timer that disconnect() clears, and ioredis never emits `end` for it: waiting for that
 * event (closeClient) would just run into closeClient's 1 s fallback.
 */
export function closeRedis(client: Redis): Promise<void> {
  if (client.status === 'end') return Promise.resolve();
  if (client.status === 'reconnecting') {
    client.disconnect();
    return Promise.resolve();
  }
  return closeClient(client);
}

/** {@link LinkMatrix.partition}: what the cut links do (default: a blackhole both ways). */
export type PartitionMode = Exclude<LinkMode, { kind: 'pass' } | { kind: 'delay' }>;

/**
 * One {@link LinkProxy} per (client, master) link, for `clients` clients and the masters on
 * `ports`: `proxies[c][m]` carries client c's link to master m. Partitions are per client: a
 * client cut from a minority of the masters still reaches a majority, one cut from a majority
 * does not.
 */
export class LinkMatrix {
  private readonly redis: Redis[] = [];

  private constructor(readonly proxies: LinkProxy[][]) {}

  /** Starts `clients` × `ports.length` proxies, all in `pass` mode. */
  static async start(clients: number, ports: readonly number[]): Promise<LinkMatrix> {
    const started = await Promise.allSettled(
      Array.from({ length: clients * ports.length }, (_, i) =>
        LinkProxy.start(ports[i % ports.length]),
      ),
    );
    const ok = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) {
      await Promise.all(ok.map((p) => p.close()));
      throw failed.reason;
    }
    const rows = Array.from({ length: clients }, (_, c) =>
      ok.slice(c * ports.length, (c + 1) * ports.length),
    );
    return new LinkMatrix(rows);
  }

  /** Number of masters. */
  get masters(): number {
    return this.proxies[0]?.length ?? 0;
  }

  /** The proxy ports of client `c`'s links, one per master. */
  ports(c: number): number[] {
    return this.row(c).map((p) => p.port);
  }

  /**
   * The largest set of masters a client can lose and still reach a majority (⌊(N−1)/2⌋ of N),
   * starting at master `start` (wrapping), so that different clients can lose different ones.
   */
  minority(start = 0): number[] {
    return this.span(Math.floor((this.masters - 1) / 2), start);
  }

  /** The smallest majority of the masters (⌊N/2⌋+1 of N), starting at master `start`. */
  majority(start = 0): number[] {
    return this.span(Math.floor(this.masters / 2) + 1, start);
  }

  /** Client `c`'s links to `masters` switch to `mode`; its other links are left as they are. */
  async partition(
    c: number,
    masters: readonly number[],
    mode: PartitionMode = { kind: 'blackhole', direction: 'both', bytes: 'hold' },
  ): Promise<void> {
    const row = this.row(c);
    await Promise.all(masters.map((m) => this.at(row, m).setMode(mode)));
  }

  /** Client `c`'s links (every client's, without `c`) back to `pass`. */
  async heal(c?: number): Promise<void> {
    const rows = c === undefined ? this.proxies : [this.row(c)];
    await Promise.all(rows.flat().map((p) => p.pass()));
  }

  /**
   * One ioredis client per master through client `c`'s links: fail fast (no offline queue, no
   * per-request retries), reconnect every 20 ms, errors swallowed. Closed by {@link close}.
   */
  createClients(c: number, overrides: RedisOptions = {}): Redis[] {
    const clients = this.ports(c).map(
      (port) =>
        new Redis({
          host: '127.0.0.1',
          port,
          enableOfflineQueue: false,
          maxRetriesPerRequest: 0,
          retryStrategy: () => 20,
          disconnectTimeout: 100,
          ...overrides,
        }),
    );
    for (const r of clients) r.on('error', () => undefined);
    this.redis.push(...clients);
    return clients;
  }

  /** Closes the clients made here, then every proxy. */
  async close(): Promise<void> {
    await Promise.all(this.redis.splice(0).map((r) => closeRedis(r)));
    await Promise.all(this.proxies.flat().map((p) => p.close()));
  }

  private row(c: number): LinkProxy[] {
    const row = this.proxies[c];
    if (!row) throw new RangeError(`no client ${c} (of ${this.proxies.length})`);
    return row;
  }

  private at(row: LinkProxy[], m: number): LinkProxy {
    const p = row[m];
    if (!p) throw new RangeError(`no master ${m} (of ${row.length})`);
    return p;
  }

  private span(size: number, start: number): number[] {
    return Array.from({ length: size }, (_, i) => (start + i) % this.masters);
  }
}
