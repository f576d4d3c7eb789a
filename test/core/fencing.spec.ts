/**
 * Fencing tokens: every acquisition returns a token per resource that strictly increases across
 * successive holders — also across master restarts (REDLOCK.md, "Clocks": process pauses make
 * fencing necessary). Several OS processes contend; masters are restarted empty in between.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { repoPath } from '../harness/paths';
import type { Redis } from 'ioredis';
import { InvalidArgumentError, Redlock, fencedRead, fencedWrite } from '../../lib';
import { fenceKey, keySlot } from '../../lib/core/base/keys';
import { RedisMaster, RedisMasters, freePort } from '../harness/redis-masters';
import { sleep, uniqueResource } from '../harness/util';

let masters: RedisMasters;
let ledger: RedisMaster;
let clients: Redis[];

beforeAll(async () => {
  masters = await RedisMasters.start(5);
  ledger = new RedisMaster(await freePort());
  await ledger.start();
  clients = masters.createClients();
  await RedisMasters.ready(clients);
});

afterAll(async () => {
  await masters.stop();
  await ledger.kill();
  ledger.cleanup();
});

function runWorker(resource: string, count: number): Promise<[number, number][]> {
  const ports = masters.masters.map((m) => m.port).join(',');
  const child = spawn(
    process.execPath,
    [
      '-r',
      'ts-node/register/transpile-only',
      repoPath('test', 'core', 'fixtures', 'fencing-worker.ts'),
      ports,
      String(ledger.port),
      resource,
      String(count),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('exit', (code) =>
      code === 0
        ? resolve(JSON.parse(out) as [number, number][])
        : reject(new Error(`worker failed (${code}): ${err}`)),
    );
  });
}

it('tokens strictly increase in acquisition order across processes and master restarts', async () => {
  const r = uniqueResource('fenced');
  const workers = [runWorker(r, 700), runWorker(r, 700), runWorker(r, 700)];
  let done = false;
  void Promise.allSettled(workers).then(() => (done = true));
  // Faults while they run: a minority restart at a time, then a majority restart.
  const faults = (async () => {
    const plan = [[4], [1], [2, 3], [0, 1, 2]];
    for (const group of plan) {
      await sleep(700);
      if (done) return;
      await Promise.all(group.map((i) => masters.masters[i].restart()));
    }
  })();
  const results = (await Promise.all(workers)).flat();
  await faults;
  expect(results).toHaveLength(2100);
  results.sort((x, y) => x[0] - y[0]);
  expect(results.map((x) => x[0])).toEqual(Array.from({ length: 2100 }, (_, i) => i + 1));
  for (let i = 1; i < results.length; i++) {
    if (!(results[i][1] > results[i - 1][1])) {
      throw new Error(
        `token did not increase at acquisition ${i + 1}: ${results[i - 1][1]} then ${results[i][1]}`,
      );
    }
  }
});

it('can be turned off', async () => {
  const rl = new Redlock(clients, { fencing: false, quarantine: false, requestTimeout: 250 });
  const lock = await rl.acquire(uniqueResource('unfenced'));
  expect(lock.fencingToken).toBeUndefined();
  expect(lock.fencingTokens).toEqual({});
  await lock.release();
  await rl.close();
});

it('hands out one token per resource of a multi-resource lock', async () => {
  const rl = new Redlock(clients, { quarantine: { duration: 0 }, requestTimeout: 250 });
  const [a, b] = [uniqueResource('fa'), uniqueResource('fb')];
  const first = await rl.acquire([a, b]);
  await first.release();
  const second = await rl.acquire([b, a]);
  expect(second.fencingTokens[a]).toBeGreaterThan(first.fencingTokens[a]);
  expect(second.fencingTokens[b]).toBeGreaterThan(first.fencingTokens[b]);
  await second.release();
  await rl.close();
});

/** `count` fresh resources whose lock keys all fall in one Redis Cluster slot. */
function sameSlot(count: number): string[] {
  const base = uniqueResource('slot');
  const slot = keySlot(`{${base}}`);
  const found = [base];
  for (let i = 0; found.length < count; i++) {
    if (keySlot(`{${base}-${i}}`) === slot) found.push(`${base}-${i}`);
  }
  return found;
}

it('keeps one counter per Cluster slot, not per resource: tokens still increase per resource', async () => {
  const keyPrefix = `fp${randomBytes(4).toString('hex')}:`;
  const rl = new Redlock(clients, { keyPrefix, quarantine: false, requestTimeout: 250 });
  const resources = sameSlot(40);
  const tokens: number[] = [];
  for (const r of resources) {
    const lock = await rl.acquire(r);
    tokens.push(lock.fencingToken as number);
    await lock.release();
  }
  // 40 distinct resources of one slot left ONE counter on each master (before: 40 each).
  for (const c of clients) {
    expect(await c.keys(`${keyPrefix}fence:*`)).toEqual([fenceKey(keyPrefix, resources[0])]);
  }
  // A shared counter: each lock of the slot draws a larger token than the one before.
  for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);

  // Per resource, tokens strictly increase while other resources of the slot are locked in
  // between, and a multi-resource lock over two resources of one slot draws two tokens.
  const [a, b] = resources;
  const first = await rl.acquire(a);
  await first.release();
  const other = await rl.acquire(b);
  await other.release();
  const both = await rl.acquire([b, a]);
  expect(both.fencingTokens[a]).toBeGreaterThan(first.fencingToken as number);
  expect(both.fencingTokens[b]).toBeGreaterThan(other.fencingToken as number);
  expect(both.fencingTokens[a]).not.toBe(both.fencingTokens[b]);
  await both.release();
  await rl.close();
});

it('fencedWrite refuses a write from a holder whose token is older than the last write', async () => {
  const rl = new Redlock(clients, { quarantine: false, requestTimeout: 250 });
  const store = clients[0]; // any Redis can be the protected store
  const r = uniqueResource('invoice');
  const old = await rl.acquire(r, { ttl: 100 });
  await sleep(150); // old holder paused past its ttl...
  const fresh = await rl.acquire(r);
  expect(await fencedWrite(store, `data:${r}`, fresh.fencingToken as number, 'new')).toBe(true);
  // ...and wakes up to write: refused, the newer holder's data stays.
  expect(await fencedWrite(store, `data:${r}`, old.fencingToken as number, 'stale')).toBe(false);
  expect(await fencedRead(store, `data:${r}`)).toEqual({
    value: 'new',
    fencingToken: fresh.fencingToken,
  });
  await expect(fencedWrite(store, `data:${r}`, -1, 'x')).rejects.toBeInstanceOf(
    InvalidArgumentError,
  );
  await fresh.release();
  await rl.close();
});
