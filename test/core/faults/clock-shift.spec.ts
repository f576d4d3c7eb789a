/**
 * The wall-clock shim of the fault harness (test/harness/faults/clock-shift.ts and .c) on real
 * processes: a redis-server under it sees its wall clock jump at once when its offset changes
 * (TIME, key expiry), its neighbours do not, it stays responsive however often the offset
 * changes; and a node process under it sees Date.now() jump while its monotonic clock does not
 * (what a test of "the holder's own wall clock jumps ±30 s" needs).
 *
 * Every wall-clock assertion brackets the server's reading between two readings of this
 * process's clock (the same machine clock), so it holds on a loaded machine as well.
 */
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import {
  ClockControl,
  ClockMasters,
  assertUnderClockShift,
  clockShiftLibrary,
} from '../../harness/faults/clock-shift';
import { RedisMasters } from '../../harness/redis-masters';
import { uniqueResource, waitUntil } from '../../harness/util';

const JUMP = 30_000;

let set: ClockMasters;
let clients: Redis[];
let plain: RedisMasters;
let plainClient: Redis;

beforeAll(async () => {
  set = await ClockMasters.start(2);
  clients = set.createClients();
  plain = await RedisMasters.start(1);
  [plainClient] = plain.createClients();
  await RedisMasters.ready([...clients, plainClient]);
});

afterEach(async () => {
  await Promise.all(set.clocks.map((c) => c.set(0)));
});

afterAll(async () => {
  await set?.stop();
  await plain?.stop();
});

/** The server's TIME in ms, with this process's Date.now() just before and just after asking. */
async function timeOf(client: Redis): Promise<{ before: number; server: number; after: number }> {
  const before = Date.now();
  const [sec, usec] = await client.time();
  const after = Date.now();
  return { before, server: Number(sec) * 1000 + Math.floor(Number(usec) / 1000), after };
}

/** Expects the server's clock to read this process's clock plus `offsetMs`. */
async function expectOffset(client: Redis, offsetMs: number): Promise<void> {
  const t = await timeOf(client);
  // TIME has µs, Date.now() whole ms: 1 ms of rounding on either side.
  expect(t.server).toBeGreaterThanOrEqual(t.before + offsetMs - 1);
  expect(t.server).toBeLessThanOrEqual(t.after + offsetMs + 1);
}

it('builds a shim that can neither allocate nor resolve symbols (its only imports)', () => {
  // Why it matters: clock-shift.c's header (jemalloc calls clock_gettime inside its first malloc).
  const nm = spawnSync('nm', ['-D', '--undefined-only', clockShiftLibrary()], { encoding: 'utf8' });
  expect(nm.status).toBe(0);
  const imports = nm.stdout
    .split('\n')
    .map((line) => /^\s+U (\S+?)(@.*)?$/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined)
    .sort();
  expect(imports).toEqual(['__errno_location', 'getenv', 'syscall']);
});

it('builds the shim once and loads it into the masters (and only into them)', async () => {
  const lib = clockShiftLibrary();
  expect(clockShiftLibrary()).toBe(lib);
  for (const m of set.masters) assertUnderClockShift(m.pid);
  expect(() => assertUnderClockShift(plain.masters[0].pid)).toThrow(/does not have/);
});

it('+30 s: the shifted master jumps at once, keys expire by its clock, the others stay', async () => {
  const [shifted, neighbour] = clients;
  for (const c of [shifted, neighbour, plainClient]) await expectOffset(c, 0);
  const key = uniqueResource('clock');
  for (const c of [shifted, neighbour, plainClient]) await c.set(key, 'v', 'PX', 10_000);

  await set.clocks[0].shift(JUMP);

  await expectOffset(shifted, JUMP);
  // 30 s later by its clock, the 10 s key is gone; the same key on the other masters is not.
  expect(await shifted.pttl(key)).toBe(-2);
  expect(await shifted.get(key)).toBeNull();
  for (const c of [neighbour, plainClient]) {
    await expectOffset(c, 0);
    expect(await c.pttl(key)).toBeGreaterThan(0);
    expect(await c.get(key)).toBe('v');
  }

  await set.clocks[0].set(0);
  await expectOffset(shifted, 0);
  await shifted.set(key, 'w', 'PX', 10_000);
  const pttl = await shifted.pttl(key);
  expect(pttl).toBeGreaterThan(0);
  expect(pttl).toBeLessThanOrEqual(10_000);
  await Promise.all([shifted, neighbour, plainClient].map((c) => c.del(key)));
});

it('−30 s: the clock goes back, a key set before lives 30 s longer by it', async () => {
  const [shifted] = clients;
  const key = uniqueResource('clock-back');
  await shifted.set(key, 'v', 'PX', 10_000);
  await set.clocks[0].set(-JUMP);
  await expectOffset(shifted, -JUMP);
  expect(await shifted.pttl(key)).toBeGreaterThan(JUMP);
  expect(await shifted.pttl(key)).toBeLessThanOrEqual(JUMP + 10_000);
  await expectOffset(clients[1], 0);
  await shifted.del(key);
});

it('stays responsive while its clock jumps back and forth, and keeps its offset on restart', async () => {
  const [shifted] = clients;
  const key = uniqueResource('busy');
  for (let i = 0; i < 50; i++) {
    await set.clocks[0].set(i % 2 === 0 ? JUMP : -JUMP);
    await expectOffset(shifted, i % 2 === 0 ? JUMP : -JUMP);
    expect(await shifted.incr(key)).toBe(i + 1);
  }
  await shifted.del(key);

  await set.clocks[0].set(JUMP);
  await set.masters[0].restart();
  assertUnderClockShift(set.masters[0].pid);
  await RedisMasters.ready([shifted]);
  await expectOffset(shifted, JUMP);
});

it('keeps the last offset when the file does not parse, reads 0 when it is missing', async () => {
  const [shifted] = clients;
  const clock = set.clocks[0];
  await clock.set(JUMP);
  // Written in place on purpose (the helper always renames a whole file into place).
  writeFileSync(clock.file, '12x\n');
  await new Promise((r) => setTimeout(r, 5));
  await expectOffset(shifted, JUMP);
  rmSync(clock.file);
  await waitUntil(async () => {
    const t = await timeOf(shifted);
    return t.server >= t.before - 1 && t.server <= t.after + 1;
  }, 2000);
  await clock.set(0); // the file again, for the other tests
});

/**
 * A node process under the shim, answering each line on stdin with its Date.now() and its
 * monotonic clock (process.hrtime, CLOCK_MONOTONIC: the same clock in every process).
 */
class ClockProbe {
  private buffered = '';
  private readonly lines: string[] = [];
  private readonly exited: Promise<void>;

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d: string) => {
      this.buffered += d;
      const parts = this.buffered.split('\n');
      this.buffered = parts.pop() ?? '';
      this.lines.push(...parts);
    });
    child.stderr.resume();
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
  }

  static start(clock: ClockControl): ClockProbe {
    const script = `
      process.stdin.setEncoding('utf8');
      process.stdin.on('data', () => {
        const wall = Date.now();
        const mono = process.hrtime.bigint().toString();
        // A timer after a jump: timers run on the monotonic clock, so it fires on time.
        setTimeout(() => console.log(JSON.stringify({ wall, mono, timer: true })), 20);
      });
      console.log('ready');`;
    const child = spawn(process.execPath, ['-e', script], {
      env: { ...process.env, ...clock.env() },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    return new ClockProbe(child);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  async nextLine(): Promise<string> {
    await waitUntil(() => this.lines.length > 0, 10_000);
    return this.lines.shift() ?? '';
  }

  /** The child's clocks, bracketed by this process's. */
  async read(): Promise<{
    before: number;
    after: number;
    wall: number;
    monoBefore: bigint;
    mono: bigint;
    monoAfter: bigint;
  }> {
    const before = Date.now();
    const monoBefore = process.hrtime.bigint();
    this.child.stdin.write('?\n');
    const line = await this.nextLine();
    const after = Date.now();
    const monoAfter = process.hrtime.bigint();
    const r = JSON.parse(line) as { wall: number; mono: string; timer: boolean };
    expect(r.timer).toBe(true);
    return { before, after, wall: r.wall, monoBefore, mono: BigInt(r.mono), monoAfter };
  }

  async stop(): Promise<void> {
    this.child.stdin.end();
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

it("moves a node process's Date.now() by the offset, not its monotonic clock", async () => {
  const clock = new ClockControl();
  const probe = ClockProbe.start(clock);
  try {
    expect(await probe.nextLine()).toBe('ready');
    assertUnderClockShift(probe.pid);
    for (const offset of [0, JUMP, -JUMP, 0]) {
      await clock.set(offset);
      const r = await probe.read();
      expect(r.wall).toBeGreaterThanOrEqual(r.before + offset);
      expect(r.wall).toBeLessThanOrEqual(r.after + offset);
      expect(r.mono).toBeGreaterThanOrEqual(r.monoBefore);
      expect(r.mono).toBeLessThanOrEqual(r.monoAfter);
    }
  } finally {
    await probe.stop();
    clock.dispose();
  }
});
