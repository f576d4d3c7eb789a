/**
 * The per-link fault proxy of the harness (test/harness/faults/link-proxy.ts) against real
 * redis-server masters and ioredis clients: each mode does what it says, modes switch while
 * connections are open and back to `pass` works again, the matrix partitions one client from a
 * minority or a majority of the masters (the engine, through the public barrel, agrees), and
 * close() leaves no socket or timer behind.
 *
 * Absence ("no reply") is checked over a short window, presence ("the held command completes",
 * "the client reconnects") by waiting for it under a deadline: neither depends on the machine
 * being idle.
 */
import { type Socket, connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import Redis, { type RedisOptions } from 'ioredis';
import { NoQuorumError, Redlock } from '../../../lib/core';
import { LinkMatrix, LinkProxy, closeRedis } from '../../harness/faults/link-proxy';
import { RedisMasters } from '../../harness/redis-masters';
import { uniqueResource, waitUntil } from '../../harness/util';

let masters: RedisMasters;
let probe: Redis[];
const opened: Redis[] = [];
const sockets: Socket[] = [];
const proxies: LinkProxy[] = [];

beforeAll(async () => {
  masters = await RedisMasters.start(3);
  probe = masters.createClients();
  await RedisMasters.ready(probe);
});

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(opened.splice(0).map((c) => closeRedis(c)));
  await Promise.all(proxies.splice(0).map((p) => p.close()));
});

afterAll(async () => {
  await masters?.stop();
});

/** How long a reply must stay away to count as "not delivered". */
const SILENCE_MS = 300;

async function proxy(master = 0): Promise<LinkProxy> {
  const p = await LinkProxy.start(masters.masters[master].port);
  proxies.push(p);
  return p;
}

/** A ready ioredis client through `p` that fails fast and reconnects every 20 ms. */
async function client(p: LinkProxy, overrides: RedisOptions = {}): Promise<Redis> {
  const c = new Redis({
    host: '127.0.0.1',
    port: p.port,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
    retryStrategy: () => 20,
    disconnectTimeout: 100,
    ...overrides,
  });
  c.on('error', () => undefined);
  opened.push(c);
  await RedisMasters.ready([c]);
  return c;
}

/** Whether `promise` is still unsettled after `ms`. */
async function pendingAfter(promise: Promise<unknown>, ms = SILENCE_MS): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((r) => setTimeout(r, ms));
  return !settled;
}

/**
 * A raw connection to `port` that sends PING once connected; `outcome` is the first thing that
 * happens to it: `reply:<text>`, an error code (ECONNREFUSED, ECONNRESET), or `closed`.
 */
function rawPing(port: number): {
  socket: Socket;
  connected: Promise<void>;
  outcome: Promise<string>;
} {
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  const connected = new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const outcome = new Promise<string>((resolve) => {
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (d: Buffer) => resolve(`reply:${d.toString().trim()}`));
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    socket.once('close', () => resolve('closed'));
  });
  return { socket, connected, outcome };
}

async function timed(f: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await f();
  return performance.now() - t;
}

it('pass: forwards both ways', async () => {
  const p = await proxy();
  const c = await client(p);
  const key = uniqueResource('pass');
  expect(await c.set(key, 'v')).toBe('OK');
  expect(await probe[0].get(key)).toBe('v');
  expect(await rawPing(p.port).outcome).toBe('reply:+PONG');
  expect(p.mode).toEqual({ kind: 'pass' });
  await c.del(key);
});

it('delay: delays each direction by its own ms, keeps the order, and back to pass', async () => {
  const p = await proxy();
  const c = await client(p);
  // Timers fire no earlier than asked, on Date.now's whole ms: 1 ms of slack per hop.
  await p.delay(150, 0);
  expect(await timed(() => c.ping())).toBeGreaterThanOrEqual(148);
  await p.delay(0, 120);
  expect(await timed(() => c.ping())).toBeGreaterThanOrEqual(118);
  await p.delay(150);
  const key = uniqueResource('order');
  const first = Array.from({ length: 10 }, () => c.incr(key));
  await p.pass(); // the first batch is still queued in the proxy
  const second = Array.from({ length: 10 }, () => c.incr(key));
  expect(await Promise.all([...first, ...second])).toEqual(
    Array.from({ length: 20 }, (_, i) => i + 1),
  );
  expect(p.stats.timers).toBe(0);
  await c.del(key);
});

it('reset: open and new connections get an RST; pass lets the client reconnect', async () => {
  const p = await proxy();
  const errors: string[] = [];
  const c = await client(p);
  c.on('error', (err: NodeJS.ErrnoException) => errors.push(err.code ?? err.message));
  await p.reset();
  await waitUntil(() => errors.includes('ECONNRESET'));
  expect(c.status).not.toBe('ready');
  expect(await rawPing(p.port).outcome).toMatch(/^(ECONNRESET|closed)$/);
  expect(p.stats.connections).toBe(0);
  await expect(c.ping()).rejects.toThrow();

  await p.pass();
  await RedisMasters.ready([c]);
  expect(await c.ping()).toBe('PONG');
});

it('refuse: connects get ECONNREFUSED, open connections are reset; reopens on the same port', async () => {
  const p = await proxy();
  const port = p.port;
  const errors: string[] = [];
  const c = await client(p);
  c.on('error', (err: NodeJS.ErrnoException) => errors.push(err.code ?? err.message));
  await p.refuse();
  expect(p.listening).toBe(false);
  expect(await rawPing(port).outcome).toBe('ECONNREFUSED');
  await waitUntil(() => errors.includes('ECONNREFUSED')); // the client's reconnects
  await expect(c.ping()).rejects.toThrow();

  await p.pass();
  expect(p.port).toBe(port);
  await RedisMasters.ready([c]);
  expect(await c.ping()).toBe('PONG');
});

it("refuse('keep'): new connects are refused while open connections keep working", async () => {
  const p = await proxy();
  const c = await client(p);
  await p.refuse('keep');
  expect(await rawPing(p.port).outcome).toBe('ECONNREFUSED');
  expect(await c.ping()).toBe('PONG');
  await p.pass();
  expect(await rawPing(p.port).outcome).toBe('reply:+PONG');
});

it('blackhole: nothing goes through either way, new connections hang; healing delivers it all', async () => {
  const p = await proxy();
  const c = await client(p);
  const key = uniqueResource('hole');
  await p.blackhole();
  const write = c.set(key, 'v');
  const fresh = rawPing(p.port);
  await fresh.connected; // accepted...
  expect(await pendingAfter(write)).toBe(true);
  expect(await pendingAfter(fresh.outcome, 0)).toBe(true); // ...and never answered
  expect(await probe[0].get(key)).toBeNull(); // the write did not reach the master

  await p.pass();
  // Held, not lost (as TCP holds bytes through a short partition): they arrive in order.
  expect(await write).toBe('OK');
  expect(await fresh.outcome).toBe('reply:+PONG');
  expect(await probe[0].get(key)).toBe('v');
  expect(await c.ping()).toBe('PONG');
  await c.del(key);
});

it("blackhole('up'): commands do not reach the master until the link heals", async () => {
  const p = await proxy();
  const c = await client(p);
  const key = uniqueResource('up');
  await p.blackhole('up');
  const write = c.set(key, 'v');
  expect(await pendingAfter(write)).toBe(true);
  expect(await probe[0].get(key)).toBeNull();
  await p.pass();
  expect(await write).toBe('OK');
  expect(await probe[0].get(key)).toBe('v');
  await c.del(key);
});

it("blackhole('down'): commands run on the master, their replies wait for the link to heal", async () => {
  const p = await proxy();
  const c = await client(p);
  const key = uniqueResource('down');
  await p.blackhole('down');
  const write = c.set(key, 'v');
  await waitUntil(async () => (await probe[0].get(key)) === 'v');
  expect(await pendingAfter(write)).toBe(true);
  await p.pass();
  expect(await write).toBe('OK');
  expect(await c.ping()).toBe('PONG');
  await c.del(key);
});

it("blackhole(…, 'drop'): bytes are lost for good, the connection is reset when the link heals", async () => {
  const p = await proxy();
  const errors: string[] = [];
  const c = await client(p);
  c.on('error', (err: NodeJS.ErrnoException) => errors.push(err.code ?? err.message));
  const key = uniqueResource('drop');
  await p.blackhole('up', 'drop');
  const write = c.set(key, 'v');
  expect(await pendingAfter(write)).toBe(true);
  await p.pass();
  await expect(write).rejects.toThrow(); // its connection was reset: no reply will ever come
  await waitUntil(() => errors.includes('ECONNRESET'));
  await RedisMasters.ready([c]);
  expect(await c.ping()).toBe('PONG');
  expect(await probe[0].get(key)).toBeNull(); // never delivered
});

it('close() destroys open connections, held bytes and delay timers', async () => {
  const p = await proxy();
  const c = await client(p);
  await p.delay(10_000);
  void c.ping().catch(() => undefined);
  await waitUntil(() => p.stats.timers > 0);
  const held = rawPing(p.port);
  await held.connected;
  expect(p.stats.connections).toBe(2);
  await p.close();
  expect(p.stats).toEqual({ connections: 0, sockets: 0, timers: 0 });
  expect(p.listening).toBe(false);
  expect(await held.outcome).toMatch(/^(closed|ECONNRESET)$/);
  expect(await rawPing(p.port).outcome).toBe('ECONNREFUSED');
  await expect(p.pass()).rejects.toThrow(/closed/);
});

describe('LinkMatrix', () => {
  let matrix: LinkMatrix;
  const engines: Redlock[] = [];

  beforeEach(async () => {
    matrix = await LinkMatrix.start(
      2,
      masters.masters.map((m) => m.port),
    );
  });

  afterEach(async () => {
    await matrix.heal();
    await Promise.all(engines.splice(0).map((e) => e.close()));
    await matrix.close();
    for (const row of matrix.proxies)
      for (const p of row) expect(p.stats).toEqual({ connections: 0, sockets: 0, timers: 0 });
  });

  async function engine(c: number): Promise<Redlock> {
    const clients = matrix.createClients(c);
    await RedisMasters.ready(clients);
    const rl = new Redlock(clients, {
      quarantine: false,
      requestTimeout: 250,
      retryDelay: 20,
      retryJitter: 10,
    });
    engines.push(rl);
    return rl;
  }

  it('has one proxy per (client, master) link; minority and majority sets', () => {
    expect(matrix.proxies).toHaveLength(2);
    expect(matrix.masters).toBe(3);
    expect(new Set([...matrix.ports(0), ...matrix.ports(1)]).size).toBe(6);
    expect(matrix.proxies[1].map((p) => p.targetPort)).toEqual(masters.masters.map((m) => m.port));
    expect(matrix.minority()).toEqual([0]);
    expect(matrix.majority()).toEqual([0, 1]);
    expect(matrix.minority(2)).toEqual([2]);
    expect(matrix.majority(2)).toEqual([2, 0]);
  });

  it('a client cut from a majority has no quorum, one cut from a minority still locks', async () => {
    const [a, b] = await Promise.all([engine(0), engine(1)]);
    const r = uniqueResource('matrix');
    // Both work before the partition.
    await (await a.acquire(r)).release();
    await (await b.acquire(r)).release();

    await matrix.partition(0, matrix.majority());
    await matrix.partition(1, matrix.minority(2), { kind: 'reset' });
    await expect(a.acquire(r, { retryCount: 0 })).rejects.toBeInstanceOf(NoQuorumError);
    const lock = await b.acquire(r, { retryCount: 0 });
    expect(lock.votes.filter((v) => v.outcome === 'ok')).toHaveLength(2);
    await lock.release();

    // Client 1's links are untouched by client 0's partition and the other way round.
    expect(matrix.proxies[0].map((p) => p.mode.kind)).toEqual(['blackhole', 'blackhole', 'pass']);
    expect(matrix.proxies[1].map((p) => p.mode.kind)).toEqual(['pass', 'pass', 'reset']);

    await matrix.heal();
    await waitUntil(async () => {
      try {
        await (await a.acquire(r, { retryCount: 0 })).release();
        return true;
      } catch {
        return false;
      }
    });
  });
});
