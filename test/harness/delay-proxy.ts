/**
 * A TCP proxy on 127.0.0.1 in front of one Redis port that delays each direction by a set number
 * of ms, changeable while connections are open. One proxy per (contender, master) link gives
 * per-link latencies, so that contenders' commands reach the masters in different orders (the
 * semaphore latency-skew test, test/core/kinds-skew.spec.ts).
 *
 * Bytes keep their order in each direction: a chunk is forwarded at max(arrival + delay, the
 * previous chunk's forwarding time), so lowering the delay never reorders. One timer per
 * direction at most; `close()` destroys every socket and clears every timer.
 */
import { type AddressInfo, type Server, type Socket, connect, createServer } from 'node:net';
import Redis from 'ioredis';
import { RedisMasters, closeClient } from './redis-masters';

/** Delays in ms: `up` client → Redis, `down` Redis → client. */
export interface Delays {
  up: number;
  down: number;
}

/** One direction of one connection: a FIFO of chunks with their release times. */
class DelayedPipe {
  private readonly queue: { at: number; chunk: Buffer }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private lastAt = 0;

  constructor(
    private readonly to: Socket,
    private readonly delay: () => number,
  ) {}

  push(chunk: Buffer): void {
    const at = Math.max(Date.now() + this.delay(), this.lastAt);
    this.lastAt = at;
    this.queue.push({ at, chunk });
    this.schedule();
  }

  get pending(): boolean {
    return this.timer !== undefined;
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }

  private schedule(): void {
    if (this.timer || this.queue.length === 0) return;
    const wait = Math.max(0, this.queue[0].at - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const now = Date.now();
      while (this.queue.length > 0 && this.queue[0].at <= now) {
        const { chunk } = this.queue.shift()!;
        if (!this.to.destroyed) this.to.write(chunk);
      }
      this.schedule();
    }, wait);
  }
}

/** A delaying TCP proxy to `127.0.0.1:targetPort`. */
export class DelayProxy {
  private readonly sockets = new Set<Socket>();
  private readonly pipes = new Set<DelayedPipe>();
  private closed = false;
  private listenPort: number | undefined;

  private constructor(
    private readonly server: Server,
    private delays: Delays,
  ) {}

  /** Starts a proxy on a free loopback port. */
  static async start(targetPort: number, delays: Partial<Delays> = {}): Promise<DelayProxy> {
    const server = createServer();
    const proxy = new DelayProxy(server, { up: delays.up ?? 0, down: delays.down ?? 0 });
    server.on('connection', (client) => proxy.accept(client, targetPort));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    void proxy.port; // remembered while listening
    return proxy;
  }

  /** The proxy's port on 127.0.0.1 (kept after close). */
  get port(): number {
    this.listenPort ??= (this.server.address() as AddressInfo).port;
    return this.listenPort;
  }

  /** Changes the delays; applies to bytes that arrive from now on. */
  setDelays(delays: Partial<Delays>): void {
    this.delays = { ...this.delays, ...delays };
  }

  /** The current delays. */
  get currentDelays(): Delays {
    return { ...this.delays };
  }

  /** Open sockets (both ends of every proxied connection) and armed timers. */
  get stats(): { sockets: number; timers: number } {
    let timers = 0;
    for (const p of this.pipes) if (p.pending) timers++;
    return { sockets: this.sockets.size, timers };
  }

  /** Stops listening, destroys every connection and clears every timer; resolves when all are closed. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const done = [
      new Promise<void>((resolve) => this.server.close(() => resolve())),
      ...[...this.sockets].map((s) =>
        s.closed
          ? Promise.resolve()
          : new Promise<void>((resolve) => s.once('close', () => resolve())),
      ),
    ];
    for (const p of this.pipes) p.stop();
    this.pipes.clear();
    for (const s of this.sockets) s.destroy();
    await Promise.all(done);
  }

  private accept(client: Socket, targetPort: number): void {
    if (this.closed) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, '127.0.0.1');
    const up = new DelayedPipe(upstream, () => this.delays.up);
    const down = new DelayedPipe(client, () => this.delays.down);
    this.pipes.add(up);
    this.pipes.add(down);
    const teardown = (): void => {
      up.stop();
      down.stop();
      this.pipes.delete(up);
      this.pipes.delete(down);
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.setNoDelay(true);
      s.on('error', teardown);
      s.on('close', () => {
        this.sockets.delete(s);
        teardown();
      });
    }
    client.on('data', (d: Buffer) => up.push(d));
    upstream.on('data', (d: Buffer) => down.push(d));
  }
}

/** {@link proxiedClients}: the proxies, one ready client through each, and their clean-up. */
export interface ProxiedClients {
  readonly proxies: DelayProxy[];
  readonly clients: Redis[];
  /** Disconnects the clients, then closes the proxies. */
  close(): Promise<void>;
}

/**
 * One {@link DelayProxy} in front of each port (no delay yet) and one ioredis client through each
 * (no per-request retries, errors swallowed), ready to use.
 */
export async function proxiedClients(ports: readonly number[]): Promise<ProxiedClients> {
  const proxies = await Promise.all(ports.map((port) => DelayProxy.start(port)));
  const clients = proxies.map((p) => {
    const c = new Redis({ host: '127.0.0.1', port: p.port, maxRetriesPerRequest: 0 });
    c.on('error', () => undefined);
    return c;
  });
  const close = async (): Promise<void> => {
    await Promise.all(clients.map((c) => closeClient(c)));
    await Promise.all(proxies.map((p) => p.close()));
  };
  try {
    await RedisMasters.ready(clients);
  } catch (err) {
    await close();
    throw err;
  }
  return { proxies, clients, close };
}
