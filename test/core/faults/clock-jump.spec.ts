/**
 * A master's wall clock jumps (issue 53, scenarios (a) and (b); docs/guarantees.md, "Clock
 * jumps"), on five real masters under the wall-clock shim (test/harness/faults/clock-shift.ts).
 *
 * Client A reaches M1–M3 only (its links to M4 and M5 are refused) and holds R; M3's clock jumps
 * +30 s, so A's key there expires at once. Client B reaches all five: without the clock check it
 * is granted R on M3–M5 while A still holds it by its own clock (the control test shows exactly
 * that, and that only fencing stops A's stale write). With the check B's engine sees M3's jump
 * in the reply that carries the vote — against its own earlier sample of M3 (a), or against the
 * other masters' clocks when it never saw M3 before (b) — and M3's vote does not count: B is
 * refused. A's own engine, at its next contact with M3, finds the jump and aborts A's signal,
 * naming the master and the jump. A backward jump, the end of the quarantine and a master whose
 * clock is off from the start are covered too.
 */
import type { Redis } from 'ioredis';
import {
  LockContendedError,
  LockLostError,
  NoQuorumError,
  Redlock,
  fencedRead,
  fencedWrite,
} from '../../../lib/core';
import type { Lock, RedlockEvent, RedlockSettings } from '../../../lib/core';
import { ClockMasters } from '../../harness/faults/clock-shift';
import { SUITE_DEFAULTS, storeWith } from '../../harness/engines';
import { RedisMasters, freePort, lockClients } from '../../harness/redis-masters';
import { closeRedis } from '../../harness/faults/link-proxy';
import { recordingLogger, sleep, uniqueResource, waitUntil } from '../../harness/util';

const JUMP = 30_000;
const M3 = 2;

let set: ClockMasters;
let data: RedisMasters;
let dataClient: Redis;
let probe: Redis[];
const engines: Redlock[] = [];
const extraClients: Redis[] = [];

beforeAll(async () => {
  set = await ClockMasters.start(5);
  probe = set.createClients();
  data = await RedisMasters.start(1);
  [dataClient] = data.createClients();
  await RedisMasters.ready([...probe, dataClient]);
});

afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close()));
  await Promise.all(extraClients.splice(0).map((c) => closeRedis(c)));
  await Promise.all(set.clocks.map((c) => c.set(0)));
});

afterAll(async () => {
  await set?.stop();
  await data?.stop();
});

const BASE: RedlockSettings = { ...SUITE_DEFAULTS, ttl: 10_000, retryCount: 0 };

function engineOn(clients: Redis[], settings: RedlockSettings = {}): Redlock {
  const e = new Redlock(clients, { ...BASE, logger: recordingLogger(), ...settings });
  engines.push(e);
  return e;
}

/** Clients that reach the masters at `reach` and get ECONNREFUSED from the others. */
async function partialClients(reach: readonly number[]): Promise<Redis[]> {
  const ports = await Promise.all(
    set.masters.map(async (m, i) => (reach.includes(i) ? m.port : freePort())),
  );
  const clients = lockClients(ports.map((port) => ({ port })));
  extraClients.push(...clients);
  await waitUntil(() => reach.every((i) => clients[i].status === 'ready'));
  return clients;
}

async function allClients(): Promise<Redis[]> {
  const clients = lockClients(set.masters);
  extraClients.push(...clients);
  await RedisMasters.ready(clients);
  return clients;
}

/** A holds `resource` on M1–M3 inside `using()`, until `done` is called. */
async function holdOnThree(
  a: Redlock,
  resource: string,
): Promise<{ lock: Lock; signal: AbortSignal; done: () => void; ended: Promise<unknown> }> {
  let done!: () => void;
  const release = new Promise<void>((r) => (done = r));
  let granted!: (x: { lock: Lock; signal: AbortSignal }) => void;
  const inside = new Promise<{ lock: Lock; signal: AbortSignal }>((r) => (granted = r));
  const ended = a
    .using(resource, async (signal, lock) => {
      granted({ lock, signal });
      await release;
    })
    .catch((err: unknown) => err);
  const { lock, signal } = await inside;
  expect(lock.votes.filter((v) => v.outcome === 'ok').map((v) => v.node)).toEqual([0, 1, 2]);
  return { lock, signal, done, ended };
}

/** Jumps M3's clock and checks that A's key there is gone at once. */
async function jumpM3(ms: number, key: string): Promise<void> {
  await set.clocks[M3].set(ms);
  if (ms > 0) await waitUntil(async () => (await probe[M3].exists(key)) === 0, 2000);
}

describe('a master whose clock jumps +30 s while A holds a lock', () => {
  it('(a) B, which had seen every master, is refused: the jumped master does not vote', async () => {
    const R = uniqueResource('clock-a');
    const a = engineOn(await partialClients([0, 1, 2]));
    const b = engineOn(await allClients());
    const warm = await b.acquire(uniqueResource('clock-a-warm'));
    await warm.release();

    const held = await holdOnThree(a, R);
    await jumpM3(JUMP, b.keyOf(R));
    const refused = await b.acquire(R).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(LockContendedError);
    const votes = (refused as LockContendedError).votes;
    expect(votes[M3].outcome).toBe('quarantined');
    expect(votes[M3].quarantineRemaining).toBeGreaterThan(0);
    // A still holds R, and the resource accepts its fenced write: nobody else got a token.
    expect(held.signal.aborted).toBe(false);
    const token = held.lock.fencingTokens[R] as number;
    expect(await fencedWrite(dataClient, `${R}:data`, token, 'from A')).toBe(true);
    // B's health says why M3 does not count.
    const m3 = (await b.health()).masters[M3];
    expect(m3.quarantined).toBe(true);
    expect(m3.clockJump).toBeGreaterThan(JUMP - 1000);
    expect(m3.clockJump).toBeLessThan(JUMP + 1000);
    held.done();
    expect(await held.ended).toBeUndefined();
  });

  it('(b) B, created after the jump, is refused: M3 disagrees with the other masters', async () => {
    const R = uniqueResource('clock-b');
    const a = engineOn(await partialClients([0, 1, 2]));
    const held = await holdOnThree(a, R);
    await jumpM3(JUMP, a.keyOf(R));
    const events: RedlockEvent[] = [];
    const logger = recordingLogger();
    const b = engineOn(await allClients(), { logger });
    b.observe((e) => events.push(e));
    const refused = await b.acquire(R).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(LockContendedError);
    expect((refused as LockContendedError).votes[M3].outcome).toBe('quarantined');
    expect(held.signal.aborted).toBe(false);
    const token = held.lock.fencingTokens[R] as number;
    expect(await fencedWrite(dataClient, `${R}:data`, token, 'from A')).toBe(true);
    // Said once in the logs and as an event.
    const said = logger.messages.filter((m) => m.includes(set.masters[M3].url.split('//')[1]));
    expect(said.length).toBe(1);
    expect(said[0]).toMatch(/ahead of the other masters/);
    const jump = events.find((e) => e.type === 'clock-jump');
    expect(jump).toMatchObject({ type: 'clock-jump', node: M3, cause: 'disagrees', lost: 0 });
    held.done();
    await held.ended;
  });

  it("A's own engine finds the jump at its next contact with M3 and aborts A's signal", async () => {
    const R = uniqueResource('clock-holder');
    const a = engineOn(await partialClients([0, 1, 2]));
    const events: RedlockEvent[] = [];
    a.observe((e) => events.push(e));
    const held = await holdOnThree(a, R);
    await jumpM3(JUMP, a.keyOf(R));
    expect(held.signal.aborted).toBe(false);
    // Any round that reaches M3 carries its clock: here an acquire of another resource.
    await expect(a.acquire(uniqueResource('clock-holder-other'))).rejects.toThrow(NoQuorumError);
    expect(held.signal.aborted).toBe(true);
    const reason = held.signal.reason as LockLostError;
    expect(reason).toBeInstanceOf(LockLostError);
    expect(reason.message).toMatch(/clock jumped \+(29|30|31)(\.\d)? s/);
    expect(reason.message).toContain(set.masters[M3].url.split('//')[1]);
    expect(events.map((e) => e.type)).toEqual(
      expect.arrayContaining(['acquired', 'lost', 'clock-jump']),
    );
    const jump = events.find((e) => e.type === 'clock-jump');
    expect(jump).toMatchObject({ node: M3, cause: 'jumped', lost: 1 });
    held.done();
    await held.ended;
  });

  /**
   * An engine on M1–M3 whose first grant of `resource` is counted with M3's vote, after which M3
   * jumps and another round reads it before the grant is handed out — the gap of the soak's
   * fair-mode overlap: the engine learned M3's jump after a grant had counted M3's vote and
   * before the lock was held, so no re-check of the held locks saw it.
   */
  async function jumpBeforeHandOut(resource: string): Promise<{ a: Redlock; found: unknown[] }> {
    const clients = await partialClients([0, 1, 2]);
    let armed = true;
    const found: unknown[] = [];
    const a: Redlock = new Redlock(
      storeWith(clients, (store) => {
        const attempt = store.attempt.bind(store);
        store.attempt = async (req) => {
          const outcome = await attempt(req);
          if (armed && outcome.grant && req.resources[0] === resource) {
            armed = false;
            await jumpM3(JUMP, a.keyOf(resource));
            const other = await attempt({ ...req, resources: [uniqueResource('clock-handed-x')] });
            if (!other.grant) await other.cleanup;
            found.push(store.distrustOf(M3));
          }
          return outcome;
        };
      }),
      { ...BASE, logger: recordingLogger() },
    );
    engines.push(a);
    return { a, found };
  }

  it('a jump learned after the votes were counted, before the lock is handed out: never handed out', async () => {
    // Refused as an attempt without a quorum (acquire would retry; here it may not: retryCount
    // 0), its keys released.
    const R = uniqueResource('clock-handed');
    const { a, found } = await jumpBeforeHandOut(R);
    const events: RedlockEvent[] = [];
    a.observe((e) => events.push(e));
    const refused = await a.acquire(R).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(found[0]).toMatchObject({ node: M3, cause: 'jumped' });
    expect(refused).toBeInstanceOf(NoQuorumError);
    const error = refused as NoQuorumError;
    expect(error.reason).toBe('unavailable');
    expect(error.quorum).toBe(3);
    expect(error.votes.map((v) => v.outcome).slice(0, 3)).toEqual(['ok', 'ok', 'quarantined']);
    expect(error.message).toMatch(/2 of 5 masters usable, 3 needed/);
    expect(events.some((e) => e.type === 'acquired')).toBe(false);
    // Its keys are gone where they were still its own (the refusal waits for the clean-up).
    const key = a.keyOf(R);
    expect(await Promise.all([probe[0].exists(key), probe[1].exists(key)])).toEqual([0, 0]);
  });

  it('using(): the routine never runs on a grant lost before its hand-out', async () => {
    const R = uniqueResource('clock-handed-using');
    const { a, found } = await jumpBeforeHandOut(R);
    let ran = false;
    const refused = await a
      .using(R, () => {
        ran = true;
      })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(found[0]).toMatchObject({ node: M3, cause: 'jumped' });
    expect(refused).toBeInstanceOf(NoQuorumError);
    expect(ran).toBe(false);
  });

  it('control: with clockCheck off, B is granted while A holds the lock; only fencing stops A', async () => {
    const R = uniqueResource('clock-off');
    const a = engineOn(await partialClients([0, 1, 2]), { clockCheck: false });
    const b = engineOn(await allClients(), { clockCheck: false });
    const warm = await b.acquire(uniqueResource('clock-off-warm'));
    await warm.release();
    const held = await holdOnThree(a, R);
    await jumpM3(JUMP, b.keyOf(R));
    // The hazard the check exists for: two holders at once.
    const lockB = await b.acquire(R);
    expect(held.signal.aborted).toBe(false);
    expect(held.lock.isValid).toBe(true);
    const tokenA = held.lock.fencingTokens[R] as number;
    const tokenB = lockB.fencingTokens[R] as number;
    expect(tokenB).toBeGreaterThan(tokenA);
    expect(await fencedWrite(dataClient, `${R}:data`, tokenB, 'from B')).toBe(true);
    expect(await fencedWrite(dataClient, `${R}:data`, tokenA, 'from A')).toBe(false);
    expect(await fencedRead(dataClient, `${R}:data`)).toEqual({
      value: 'from B',
      fencingToken: tokenB,
    });
    await lockB.release();
    held.done();
    await held.ended;
  });
});

describe('clock check: the quarantine, backward jumps, a clock off from the start', () => {
  const SHORT: RedlockSettings = { ttl: 1000, maxTtl: 1000 };

  it('a jumped master votes again once back in line and its quarantine ended', async () => {
    // B reaches M3–M5 only: every grant needs M3's vote.
    const b = engineOn(await partialClients([2, 3, 4]), SHORT);
    const R = uniqueResource('clock-end');
    await (await b.acquire(R)).release();
    await set.clocks[M3].set(JUMP);
    const during = await b.acquire(R).catch((err: unknown) => err);
    expect(during).toBeInstanceOf(NoQuorumError);
    expect((during as NoQuorumError).votes[M3].outcome).toBe('quarantined');
    // Still 30 s off the others past the quarantine period: still no vote.
    await sleep(b.settings.quarantine.duration + 200);
    await expect(b.acquire(R)).rejects.toThrow(NoQuorumError);
    await set.clocks[M3].set(0);
    await expect(b.acquire(R)).rejects.toThrow(NoQuorumError);
    await waitUntil(async () => !(await b.health()).masters[M3].quarantined, 5000);
    const after = await b.acquire(R);
    expect(after.votes[M3].outcome).toBe('ok');
    await after.release();
  });

  it('a backward jump is found too, and fencing tokens keep growing across it', async () => {
    const b = engineOn(await partialClients([2, 3, 4]), SHORT);
    const R = uniqueResource('clock-back');
    const first = await b.acquire(R);
    const t1 = first.fencingTokens[R] as number;
    await first.release();
    await set.clocks[M3].set(-JUMP);
    const during = await b.acquire(R).catch((err: unknown) => err);
    expect(during).toBeInstanceOf(NoQuorumError);
    expect((during as NoQuorumError).votes[M3].outcome).toBe('quarantined');
    await set.clocks[M3].set(0);
    await expect(b.acquire(R)).rejects.toThrow(NoQuorumError);
    await waitUntil(async () => !(await b.health()).masters[M3].quarantined, 5000);
    const after = await b.acquire(R);
    expect(after.votes[M3].outcome).toBe('ok');
    expect(after.fencingTokens[R]).toBeGreaterThan(t1);
    await after.release();
  });

  it('a master whose clock is off the others does not vote while it is off, and again once in line', async () => {
    await set.clocks[M3].set(5000);
    const logger = recordingLogger();
    const b = engineOn(await partialClients([2, 3, 4]), { ...SHORT, logger });
    const R = uniqueResource('clock-off-start');
    const first = await b.acquire(R).catch((err: unknown) => err);
    expect(first).toBeInstanceOf(NoQuorumError);
    expect((first as NoQuorumError).votes[M3].outcome).toBe('quarantined');
    const m3 = (await b.health()).masters[M3];
    expect(m3.clockJump).toBeGreaterThan(4000);
    expect(m3.clockJump).toBeLessThan(6000);
    // Past the quarantine period, still off: still no vote, and no second warning.
    await sleep(b.settings.quarantine.duration + 200);
    const still = await b.acquire(R).catch((err: unknown) => err);
    expect(still).toBeInstanceOf(NoQuorumError);
    expect((still as NoQuorumError).votes[M3].outcome).toBe('quarantined');
    expect(logger.messages.filter((m) => m.includes('ahead of the other masters')).length).toBe(1);
    // Back in line: it votes again once the quarantine its last reading started is over.
    await set.clocks[M3].set(0);
    await expect(b.acquire(R)).rejects.toThrow(NoQuorumError);
    await waitUntil(async () => !(await b.health()).masters[M3].quarantined, 5000);
    const later = await b.acquire(R);
    expect(later.votes[M3].outcome).toBe('ok');
    await later.release();
  });

  it('a clock set back and jumped forward again between two readings is still caught', async () => {
    // B's last reading of M3 is from while it was 30 s ahead (and out of its quarantine by
    // time); M3 is set back, A locks R on M1–M3, M3 jumps forward again: against B's previous
    // reading nothing moved, but M3 is 30 s off the other masters.
    const R = uniqueResource('clock-back-forth');
    const b = engineOn(await allClients(), { quarantine: { enabled: false, duration: 1000 } });
    await (await b.acquire(uniqueResource('clock-bf-warm'))).release();
    await set.clocks[M3].set(JUMP);
    await (await b.acquire(uniqueResource('clock-bf-ahead'))).release();
    await sleep(1200);
    await (await b.acquire(uniqueResource('clock-bf-ahead-2'))).release();
    await set.clocks[M3].set(0);
    const a = engineOn(await partialClients([0, 1, 2]), { clockCheck: false });
    const held = await holdOnThree(a, R);
    await jumpM3(JUMP, a.keyOf(R));
    const refused = await b.acquire(R).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(LockContendedError);
    expect((refused as LockContendedError).votes[M3].outcome).toBe('quarantined');
    held.done();
    await held.ended;
  });

  it('a larger clockTolerance accepts a master that is off by less', async () => {
    await set.clocks[M3].set(5000);
    const b = engineOn(await partialClients([2, 3, 4]), { ...SHORT, clockTolerance: 10_000 });
    const lock = await b.acquire(uniqueResource('clock-tolerance'));
    expect(lock.votes[M3].outcome).toBe('ok');
    await lock.release();
  });
});
