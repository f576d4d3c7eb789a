/**
 * Every reply shape of every acquire script path, read by every kind's decoder, on real masters
 * and on both protocols (docs/lock-kinds.md, "Replies"): the boot marker not checked (age -1),
 * checked fully (its age; 0 for a missing marker, young ones in quarantine), or known old (-2,
 * bootMarkerAge's one-GET path); a key free, held by a plain lock, by readers, by a semaphore of
 * the same or of another limit, or by something foreign. Runs in the main projects (ioredis 6:
 * RESP3, and RESP2 with `protocol: 2`) and in the `ioredis5` project (RESP2).
 *
 * And the engine on masters whose boot markers it knows to be old (the default restart
 * quarantine): another kind at a key is a `KindMismatchError`, as on a fresh engine — never an
 * outage made of "malformed reply" votes.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Redis, RedisOptions } from 'ioredis';
import { KindMismatchError, LockContendedError } from '../../lib/core/base/errors';
import { lockKindFor } from '../../lib/core/redis/store';
import type { AcquireAnswer, LockKind, ScriptCall } from '../../lib/core/redis/kinds/kind';
import type { LockKindSpec } from '../../lib/core/base/kind-spec';
import { counterKeyOf, lockKey, waitKey } from '../../lib/core/base/keys';
import { Redlock } from '../../lib/core/redlock';
import { SUITE_DEFAULTS, useMasters } from '../harness/engines';
import { RedisMasters } from '../harness/redis-masters';
import { recordingLogger, uniqueResource, waitUntil } from '../harness/util';

// Resolved through jest's module map, so that the ioredis5 project sees ioredis 5's manifest.
const { version } = createRequire(join(process.cwd(), 'index.js'))('ioredis/package.json') as {
  version: string;
};
const major = Number(version.split('.')[0]);

const variants: [string, RedisOptions][] =
  major >= 6
    ? [
        ['RESP3 (ioredis 6 default)', {}],
        ['RESP3 with replyMapping resp3', { protocol: 3, replyMapping: 'resp3' }],
        ['RESP2 (protocol: 2)', { protocol: 2 }],
      ]
    : [['RESP2 (ioredis 5)', {}]];

const PREFIX = 'lock:';
const MARKER = `${PREFIX}boot`;
/** An old boot marker: every master of this file was "born" ten minutes ago. */
const OLD_BIRTH = String(Date.now() - 600_000);

const suite = useMasters(3);

beforeAll(async () => {
  await Promise.all(suite.probe.map((c) => c.set(MARKER, OLD_BIRTH)));
});

const KINDS: readonly [string, LockKindSpec | undefined][] = [
  ['mutex', undefined],
  ['shared', { name: 'shared' }],
  ['semaphore 3', { name: 'semaphore', limit: 3 }],
  ['semaphore 1', { name: 'semaphore', limit: 1 }],
];

/** What is at the key before the acquire, written with the probe (server-side expiry). */
type KeyState = 'free' | 'mutex' | 'shared' | 'semaphore 3' | 'full semaphore 1' | 'foreign';
const STATES: readonly KeyState[] = [
  'free',
  'mutex',
  'shared',
  'semaphore 3',
  'full semaphore 1',
  'foreign',
];

async function put(c: Redis, key: string, state: KeyState): Promise<void> {
  await c.del(key);
  const exp = Date.now() + 60_000; // far enough for any server clock of this machine
  if (state === 'mutex') await c.set(key, 'someone-else', 'PX', 60_000);
  if (state === 'shared') await c.zadd(key, '+inf', '#shared', exp, 'reader-a');
  if (state === 'semaphore 3') await c.zadd(key, '+inf', '#semaphore:3', exp, 'holder-a');
  if (state === 'full semaphore 1') await c.zadd(key, '+inf', '#semaphore:1', exp, 'holder-a');
  if (state === 'foreign') await c.rpush(key, 'x');
  if (state !== 'free' && state !== 'mutex') await c.pexpire(key, 60_000);
}

/** The marker as the engine may meet it: not checked, missing, young, old (unknown), known. */
type MarkerPath = 'unchecked' | 'missing' | 'young' | 'old' | 'known';
const PATHS: readonly MarkerPath[] = ['unchecked', 'missing', 'young', 'old', 'known'];

/** The kind's own script call (as the store builds it), with the marker path's arguments. */
function callFor(
  kind: LockKind,
  resource: string,
  path: MarkerPath,
  fencing: boolean,
  retries: boolean,
): ScriptCall {
  const key = lockKey(PREFIX, resource);
  const call = kind.acquire({
    token: `tok${Math.random().toString(36).slice(2)}`,
    ttl: 10_000,
    keys: [key],
    fenceKeys: fencing ? [counterKeyOf(PREFIX, key)] : undefined,
    marker: path === 'unchecked' ? undefined : MARKER,
    markerBirth: path === 'known' ? OLD_BIRTH : undefined,
    fenceTtl: 60_000,
    waitKeys: kind.name === 'shared' || retries ? [waitKey(PREFIX, resource)] : undefined,
    waitTtl: retries ? 100 : undefined,
    clearFlags: retries,
  });
  if (path !== 'known' || call.birthArg === undefined) return call;
  const args = call.args.slice();
  args[call.birthArg] = OLD_BIRTH;
  return { ...call, args };
}

/** The call's reply, or that of the call it asks to send next (as redis/masters/dispatch.ts does). */
async function evalFollowed(c: Redis, call: ScriptCall): Promise<unknown> {
  const value = await c.eval(call.script.source, call.keys.length, ...call.keys, ...call.args);
  const next = call.followUp?.(value, call);
  return next ? evalFollowed(c, next) : value;
}

async function prepareMarker(c: Redis, path: MarkerPath): Promise<void> {
  if (path === 'missing') await c.del(MARKER);
  else if (path === 'young') await c.set(MARKER, String(Date.now() - 100));
  else await c.set(MARKER, OLD_BIRTH);
}

/** What the decoded answer must say for a kind meeting a key state. */
function expected(kind: LockKind, state: KeyState): 'granted' | 'held' | 'mismatch' {
  if (state === 'free') return 'granted';
  if (state === 'foreign') return 'mismatch';
  if (kind.name === 'mutex') return state === 'mutex' || state === 'shared' ? 'held' : 'mismatch';
  if (kind.name === 'shared') {
    return state === 'mutex' ? 'held' : state === 'shared' ? 'granted' : 'mismatch';
  }
  const mine = state === `semaphore ${kind.limit}` || state === `full semaphore ${kind.limit}`;
  if (!mine) return 'mismatch';
  return state.startsWith('full') ? 'held' : 'granted';
}

function statusOf(a: AcquireAnswer): 'granted' | 'held' | 'mismatch' {
  if (a.mismatch) return 'mismatch';
  return a.granted ? 'granted' : 'held';
}

describe.each(variants)('ioredis %s', (_label, options) => {
  let c: Redis;
  beforeAll(async () => {
    [c] = suite.masters.createClients(options);
    await RedisMasters.ready([c]);
  });
  afterAll(async () => {
    await c.quit();
    await suite.probe[0].set(MARKER, OLD_BIRTH);
  });

  it('every kind decodes every reply of every acquire path (marker, key state, fencing, retries)', async () => {
    const failures: string[] = [];
    let cases = 0;
    for (const [kindName, spec] of KINDS) {
      const kind = lockKindFor(spec);
      for (const state of STATES) {
        for (const path of PATHS) {
          for (const fencing of [false, true]) {
            for (const retries of kind.name === 'mutex' ? [false, true] : [false]) {
              const resource = uniqueResource('shape');
              const key = lockKey(PREFIX, resource);
              await prepareMarker(c, path);
              await put(c, key, state);
              const value = await evalFollowed(c, callFor(kind, resource, path, fencing, retries));
              const label = `${kindName} on ${state}, marker ${path}, fencing ${fencing}, retries ${retries}: ${JSON.stringify(value)}`;
              cases++;
              try {
                const a = kind.readAcquire([{ resources: [resource], value }], [resource]);
                if (statusOf(a) !== expected(kind, state)) {
                  failures.push(`${label} read as ${statusOf(a)}`);
                }
                const age = a.markerAge;
                // Known old (-2) and unchecked (-1) have no age; a checked marker has its own.
                if ((path === 'known' || path === 'unchecked') !== (age === undefined)) {
                  failures.push(`${label} with marker age ${age}`);
                }
                if (
                  (path === 'missing' || path === 'young') &&
                  !(age !== undefined && age < 60_000)
                ) {
                  failures.push(`${label}: a young marker read as ${age}`);
                }
              } catch (err) {
                failures.push(`${label} threw ${(err as Error).message}`);
              }
            }
          }
        }
      }
    }
    expect(failures).toEqual([]);
    expect(cases).toBe(
      KINDS.length * STATES.length * PATHS.length * 2 + STATES.length * PATHS.length * 2,
    );
  });

  it('the engine on known old markers: another kind is a KindMismatchError, contention is contention', async () => {
    const clients = suite.masters.createClients(options);
    await RedisMasters.ready(clients);
    // Every acquire reply the engine reads, to show it took the known-marker path (-2).
    const ages: unknown[] = [];
    for (const client of clients) {
      const evalsha = client.evalsha.bind(client) as (...a: unknown[]) => Promise<unknown>;
      (client as unknown as { evalsha: (...a: unknown[]) => Promise<unknown> }).evalsha = (
        ...a: unknown[]
      ) =>
        evalsha(...a).then((reply) => {
          // A mutex acquire's reply comes wrapped with the master's clock (redis/scripts/lua.ts
          // clockLua): {time, reply}.
          const inner = Array.isArray(reply) && Array.isArray(reply[1]) ? reply[1] : reply;
          if (Array.isArray(inner)) ages.push(inner[1]);
          return reply;
        });
    }
    // The restart quarantine on (the default), shorter than the masters' age so that the engine
    // learns their markers are old; fast retries.
    const rl = new Redlock(clients, {
      quarantine: { duration: 1500 },
      logger: recordingLogger(),
      requestTimeout: 500,
      retryDelay: 20,
      retryJitter: 10,
    });
    const holderClients = suite.masters.createClients(options);
    await RedisMasters.ready(holderClients);
    const holder = new Redlock(holderClients, { ...SUITE_DEFAULTS, requestTimeout: 500 });
    try {
      // Until the engine compares the markers instead of computing their age — on every
      // master: one learnt late would take the full check once more below. (The release waits
      // for every master, so every acquire reply has been read by then.)
      await waitUntil(async () => {
        ages.length = 0;
        const lock = await rl.tryAcquire(uniqueResource('learn')).catch(() => null);
        await lock?.release();
        return ages.length === clients.length && ages.every((a) => a === -2);
      }, 10_000);

      // Another engine holds a semaphore of limit 3 (the case).
      const r = uniqueResource('sem');
      const sem = await holder.acquire(r, { limit: 3 });
      ages.length = 0;
      await expect(rl.tryAcquire(r)).rejects.toBeInstanceOf(KindMismatchError);
      expect(ages).toContain(-2);
      // A plain acquire that would retry (raises flags and poll marks on its refused path).
      await expect(rl.acquire(r, { waitTimeout: 1000 })).rejects.toBeInstanceOf(KindMismatchError);
      await expect(rl.tryAcquire(r, { shared: true })).rejects.toBeInstanceOf(KindMismatchError);
      await expect(rl.tryAcquire(r, { limit: 2 })).rejects.toBeInstanceOf(KindMismatchError);
      // The holder kinds compare the known marker too (a full check would make the engine
      // forget it, and every plain lock after it read the clock again).
      ages.length = 0;
      const second = await rl.acquire(r, { limit: 3 });
      expect(ages).toContain(-2);
      expect(ages.filter((a) => typeof a === 'number' && a >= 0)).toEqual([]);
      await second.release();
      await sem.release();

      const s = uniqueResource('shared');
      const reader = await rl.acquire(s, { shared: true });
      await expect(rl.tryAcquire(s, { limit: 2 })).rejects.toBeInstanceOf(KindMismatchError);
      await expect(rl.tryAcquire(s)).resolves.toBeNull();
      await reader.release();

      const m = uniqueResource('plain');
      const plain = await rl.acquire(m);
      await expect(rl.tryAcquire(m, { limit: 2 })).rejects.toBeInstanceOf(KindMismatchError);
      await expect(rl.acquire(m, { shared: true, retryCount: 0 })).rejects.toBeInstanceOf(
        LockContendedError,
      );
      await plain.release();

      const full = uniqueResource('full');
      const only = await rl.acquire(full, { limit: 1 });
      await expect(rl.acquire(full, { limit: 1, retryCount: 0 })).rejects.toBeInstanceOf(
        LockContendedError,
      );
      await only.release();
    } finally {
      await rl.close();
      await holder.close();
      await Promise.all([...clients, ...holderClients].map((x) => x.quit().catch(() => undefined)));
    }
  });
});
