/**
 * Issue 53, "Done when" (c): the holder process's own wall clock jumping ±30 s changes neither
 * the lock's validity nor its extension nor its release.
 *
 * The holder is a child node process (fixtures/clock-holder-worker.ts, the engine built from
 * source by ts-node) under the wall-clock shim (test/harness/faults/clock-shift.ts): the test
 * moves its Date.now() by ±30 s while its monotonic clock (CLOCK_MONOTONIC: process.hrtime and
 * performance.now()) runs on. The masters are real redis-servers with the true time; a contender
 * engine in this process checks that the resource stays locked while held and is free after the
 * release, and probe clients look at the keys on every master.
 *
 * What catches an engine that reads the wall clock for validity (lib/core/base/clock.ts
 * `monotonicNow` returning Date.now()): every reading's validity end, on the shared monotonic
 * clock, must not move at a jump (`expectSameEnd`) and the remaining validity must never exceed
 * the ttl (`expectHeld`). With a wall-clock engine, +30 s makes remainingValidity 0 (isValid
 * false, the signal aborted) at once, and −30 s makes it 30 s too long.
 *
 * The engine also reads each master's clock (`TIME`) against its own monotonic clock to find a
 * master whose clock jumps (lib/core/redis/masters/clock-watch.ts, on by default). Had it used
 * Date.now() there, the holder's own jump would look like every master jumping: their votes
 * would stop counting and the extension after the jump would fail (`expectHeld` again).
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { LockContendedError, type Redlock } from '../../../lib/core';
import { lockKey } from '../../../lib/core/base/keys';
import type { HolderCommand, HolderReply, Reading } from '../fixtures/clock-holder-worker';
import { ClockControl, assertUnderClockShift } from '../../harness/faults/clock-shift';
import { useMasters } from '../../harness/engines';
import { repoPath } from '../../harness/paths';
import { uniqueResource, waitUntil } from '../../harness/util';

const JUMP = 30_000;
const TTL = 1500;
/** performance.now() and process.hrtime read the same clock; 1 ms covers their rounding. */
const SLACK = 1;

const prefix = `hc${randomBytes(4).toString('hex')}:`;
const suite = useMasters(3, { keyPrefix: prefix });

/** The child process holding the lock, driven line by line (see its file). */
class Holder {
  private readonly replies: HolderReply[] = [];
  private stderr = '';
  private exit: string | undefined;
  private readonly exited: Promise<void>;

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    createInterface({ input: child.stdout }).on('line', (line) =>
      this.replies.push(JSON.parse(line) as HolderReply),
    );
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d: string) => (this.stderr += d));
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.exit = `exited (${code ?? signal})`;
        resolve();
      }),
    );
  }

  static async start(clock: ClockControl, ports: number[]): Promise<Holder> {
    const child = spawn(
      process.execPath,
      [
        '-r',
        'ts-node/register/transpile-only',
        repoPath('test', 'core', 'fixtures', 'clock-holder-worker.ts'),
        ports.join(','),
        prefix,
      ],
      { env: { ...process.env, ...clock.env() }, stdio: ['pipe', 'pipe', 'pipe'] },
    );
    const holder = new Holder(child);
    const ready = await holder.next();
    expect(ready.ok).toBe(true);
    assertUnderClockShift(child.pid);
    return holder;
  }

  /** Sends a command; resolves with its reply (replies come in order). */
  async send(cmd: HolderCommand): Promise<HolderReply> {
    this.child.stdin.write(`${JSON.stringify(cmd)}\n`);
    return this.next();
  }

  async stop(): Promise<void> {
    if (this.exit === undefined) {
      this.child.stdin.write(`${JSON.stringify({ op: 'close' })}\n`);
      this.child.stdin.end();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.exited, new Promise((r) => (timer = setTimeout(r, 5000)))]);
      clearTimeout(timer);
      if (this.exit === undefined) this.child.kill('SIGKILL');
    }
    await this.exited;
  }

  private async next(): Promise<HolderReply> {
    // ts-node compiles the engine at start: generous on a loaded machine, still bounded.
    await waitUntil(() => this.replies.length > 0 || this.exit !== undefined, 30_000).catch(
      (err: Error) => {
        throw new Error(`${err.message}; holder stderr: ${this.stderr}`);
      },
    );
    const reply = this.replies.shift();
    if (!reply) throw new Error(`holder ${this.exit}: ${this.stderr}`);
    return reply;
  }
}

let clock: ClockControl;
let holder: Holder;

beforeAll(async () => {
  clock = new ClockControl();
  holder = await Holder.start(
    clock,
    suite.masters.masters.map((m) => m.port),
  );
  suite.closeFirst(async () => {
    await holder?.stop();
    clock?.dispose();
  });
}, 60_000);

afterEach(async () => {
  await clock.set(0);
});

/** Sends `cmd` and checks that the holder's Date.now() read the true time plus `offset`. */
async function at(offset: number, cmd: HolderCommand): Promise<HolderReply> {
  const before = Date.now();
  const reply = await holder.send(cmd);
  const after = Date.now();
  // The shim reached the child (else the test would pass for the wrong reason).
  expect(reply.wall).toBeGreaterThanOrEqual(before + offset);
  expect(reply.wall).toBeLessThanOrEqual(after + offset);
  return reply;
}

/** The validity end on the shared monotonic clock: [earliest, latest] it can be. */
function end(r: Reading): [number, number] {
  if (r.remaining === undefined) throw new Error('no lock in the reading');
  return [r.monoBefore + r.remaining, r.monoAfter + r.remaining];
}

/** The lock is held: valid, not aborted, and never more validity than its ttl. */
function expectHeld(r: HolderReply): void {
  // The command's error, if any, shows in the diff.
  const { ok, message, isValid, aborted } = r;
  expect({ ok, message, isValid, aborted }).toEqual({
    ok: true,
    message: undefined,
    isValid: true,
    aborted: false,
  });
  expect(r.remaining).toBeGreaterThan(0);
  // −30 s under a wall-clock engine: 30 s of validity more than the ttl.
  expect(r.remaining).toBeLessThanOrEqual(TTL);
}

/** Both readings see the same validity end (no extension in between): the jump moved nothing. */
function expectSameEnd(a: Reading, b: Reading): void {
  const [aLow, aHigh] = end(a);
  const [bLow, bHigh] = end(b);
  expect(bHigh).toBeGreaterThanOrEqual(aLow - SLACK);
  expect(bLow).toBeLessThanOrEqual(aHigh + SLACK);
}

/** The lock's key is on every master with the holder's token and at most the ttl to live. */
async function expectKeysHeld(r: string, value: string | undefined): Promise<void> {
  const key = lockKey(prefix, r);
  for (const probe of suite.probe) {
    expect(await probe.get(key)).toBe(value);
    const pttl = await probe.pttl(key);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(TTL);
  }
}

let contenderEngine: Redlock | undefined;
/** An engine in this process, with the true time, over the same masters. */
function contender(): Redlock {
  return (contenderEngine ??= suite.engine());
}

async function expectContended(r: string): Promise<void> {
  await expect(contender().acquire(r, { retryCount: 0 })).rejects.toBeInstanceOf(
    LockContendedError,
  );
}

/** The keys are gone from every master and the contender gets the resource at once. */
async function expectFree(r: string): Promise<void> {
  const key = lockKey(prefix, r);
  // A release resolves once a majority answered; the last master's delete may land just after.
  await waitUntil(async () => {
    const left = await Promise.all(suite.probe.map((p) => p.exists(key)));
    return left.every((n) => n === 0);
  }, 2000);
  const lock = await contender().acquire(r, { retryCount: 0 });
  expect((await lock.release()).complete).toBe(true);
}

describe.each([
  ['+30 s', JUMP],
  ['−30 s', -JUMP],
])("the holder's wall clock jumps %s", (_, jump) => {
  it('acquire, explicit extend and release: validity, extension and release unchanged', async () => {
    const r = uniqueResource('holder-clock');
    const granted = await at(0, { op: 'acquire', resource: r, ttl: TTL });
    expectHeld(granted);
    await expectContended(r);

    await clock.set(jump);
    const jumped = await at(jump, { op: 'state' });
    expectHeld(jumped);
    expectSameEnd(granted, jumped);

    // Extended under the jumped clock: from the time its request was sent, by the ttl.
    const extended = await at(jump, { op: 'extend' });
    expectHeld(extended);
    expect(extended.extensions).toBe(1);
    expect(end(extended)[0]).toBeGreaterThan(end(jumped)[1] - SLACK);
    await expectKeysHeld(r, granted.value);
    await expectContended(r);

    // And back: a jump the other way moves nothing either.
    await clock.set(0);
    const back = await at(0, { op: 'state' });
    expectHeld(back);
    expectSameEnd(extended, back);
    const again = await at(0, { op: 'extend' });
    expectHeld(again);
    expect(again.extensions).toBe(2);

    await clock.set(jump);
    const released = await at(jump, { op: 'release' });
    expect(released).toMatchObject({ ok: true, complete: true, deleted: 3 });
    await expectFree(r);
  });

  it('using() with auto-extension: the signal stays quiet, extensions go on, release frees', async () => {
    const r = uniqueResource('holder-clock-using');
    const granted = await at(0, { op: 'using', resource: r, ttl: TTL });
    expectHeld(granted);
    await expectContended(r);

    await clock.set(jump);
    const jumped = await at(jump, { op: 'state' });
    expectHeld(jumped);
    if (jumped.extensions === granted.extensions) expectSameEnd(granted, jumped);

    // Two auto-extensions under the jumped clock; every reading on the way is a held lock
    // whose validity end only moves forward.
    let last = jumped;
    await waitUntil(async () => {
      const now = await at(jump, { op: 'state' });
      expectHeld(now);
      if (now.extensions === last.extensions) expectSameEnd(last, now);
      else expect(end(now)[1]).toBeGreaterThan(end(last)[0]);
      last = now;
      return (now.extensions ?? 0) >= (jumped.extensions ?? 0) + 2;
    }, 10_000);
    await expectKeysHeld(r, granted.value);
    await expectContended(r);

    await at(jump, { op: 'release' });
    await expectFree(r);
  });
});
