/**
 * Per-process wall-clock control for the fault harness: real redis-server masters (or any other
 * dynamically linked process, e.g. `node`) whose wall clock is moved by a set offset, changeable
 * while they run, while the rest of the machine keeps the true time.
 *
 * The work is done by an LD_PRELOAD shim (clock-shift.c, next to this file; why it is written in
 * C and how it reads its offset is explained there). This module compiles it with gcc once per
 * test run, gives each process its own offset file ({@link ClockControl}), and starts masters
 * under it ({@link ClockMasters}).
 *
 *     const set = await ClockMasters.start(3);
 *     await set.clocks[0].shift(30_000); // master 0's clock jumps 30 s ahead, the others do not
 *     await set.clocks[0].set(0);        // and back
 *     await set.stop();
 *
 * Linux only (LD_PRELOAD of an ELF shared object), and gcc must be installed (.ci/run installs it).
 * A process under the shim passes LD_PRELOAD on to the processes it spawns: they share its clock.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Redis, RedisOptions } from 'ioredis';
import { repoPath } from '../paths';
import {
  type MastersOptions,
  PortTakenError,
  RedisMaster,
  closeClient,
  lockClients,
  freePort,
} from '../redis-masters';
import { runDir } from '../run-dir';

/** The variable naming the offset file (read by clock-shift.c). */
export const CLOCK_SHIFT_FILE_ENV = 'CLOCK_SHIFT_FILE';

/**
 * How long the shim trusts an offset it read (clock-shift.c's REFRESH_NS is 1 ms), plus margin:
 * every clock read that starts this long after the file was replaced sees the new offset.
 */
const SHIM_REFRESH_MS = 2;

const GCC = process.env.CC_BIN ?? 'gcc';
const GCC_FLAGS = [
  '-shared',
  '-fPIC',
  '-O2',
  '-std=c11',
  '-fvisibility=hidden',
  '-Wall',
  '-Wextra',
  '-Werror',
];

let built: string | undefined;

/**
 * The path of the compiled shim, building it on first use. The build is cached by content (hash
 * of the source and the flags) in the jest run directory, so a run compiles it once whatever the
 * number of workers; outside jest, in a per-user directory under the temp directory. Parallel
 * builders each compile to their own temp name and rename it into place: rename is atomic, so no
 * process ever loads a half-written library, and the last one to finish just replaces an
 * identical file.
 */
export function clockShiftLibrary(): string {
  if (built && existsSync(built)) return built;
  const sourceFile = repoPath('test', 'harness', 'faults', 'clock-shift.c');
  const hash = createHash('sha256')
    .update(readFileSync(sourceFile))
    .update(GCC_FLAGS.join(' '))
    .digest('hex')
    .slice(0, 16);
  const cache = cacheDir();
  const target = join(cache, `clock-shift-${hash}.so`);
  if (!existsSync(target)) {
    const temp = join(
      cache,
      `.clock-shift-${hash}.${process.pid}.${randomBytes(4).toString('hex')}`,
    );
    const gcc = spawnSync(GCC, [...GCC_FLAGS, '-o', temp, sourceFile], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    if (gcc.error || gcc.status !== 0) {
      rmSync(temp, { force: true });
      throw new Error(
        gcc.error && (gcc.error as NodeJS.ErrnoException).code === 'ENOENT'
          ? `${GCC} not found: install it (Debian: apt-get install -y gcc) or set CC_BIN`
          : `compiling clock-shift.c failed: ${gcc.error?.message ?? gcc.stderr}`,
      );
    }
    renameSync(temp, target);
  }
  return (built = target);
}

function cacheDir(): string {
  const run = runDir();
  const candidates = run ? [join(run, 'clock-shift')] : [];
  candidates.push(join(tmpdir(), `redlock-clock-shift-${userInfo().uid}`));
  for (const dir of candidates) {
    try {
      mkdirSync(dir, { recursive: true });
      return dir;
    } catch {
      // The run directory is gone (its teardown ran): use the next one.
    }
  }
  throw new Error('no directory to build clock-shift.so in');
}

/** A fresh directory for offset files, swept with the run directory when there is one. */
function clockDir(): string {
  const run = runDir();
  if (run) {
    try {
      return mkdtempSync(join(run, 'clock-'));
    } catch {
      // The run is over: fall back to the temp directory.
    }
  }
  return mkdtempSync(join(tmpdir(), 'redlock-clock-'));
}

/**
 * One process's wall-clock offset: a file the shim reads. Give {@link env} to the process to
 * start it under the shim; {@link set} and {@link shift} move its clock while it runs.
 */
export class ClockControl {
  /** The offset file. */
  readonly file: string;
  private readonly dir: string;
  private offset = 0;
  private writes = 0;

  constructor(initialMs = 0) {
    this.dir = clockDir();
    this.file = join(this.dir, 'offset-ms');
    this.write(initialMs);
  }

  /** The offset in ms now in effect (as last set). */
  get offsetMs(): number {
    return this.offset;
  }

  /**
   * Environment for a process under the shim with this clock: LD_PRELOAD (added in front of any
   * LD_PRELOAD the caller passes in `base`) and the offset file.
   */
  env(base: Readonly<Record<string, string | undefined>> = {}): Record<string, string> {
    const preload = [clockShiftLibrary(), base.LD_PRELOAD].filter(Boolean).join(':');
    return { LD_PRELOAD: preload, [CLOCK_SHIFT_FILE_ENV]: this.file };
  }

  /**
   * Sets the offset to `ms` (signed, whole ms). Resolves once every clock read the process starts
   * from then on sees it (the shim re-reads the file at most every millisecond).
   */
  async set(ms: number): Promise<void> {
    const written = performance.now();
    this.write(ms);
    // Not a guess about load: the shim's cache is bounded in monotonic time, and so is this wait.
    while (performance.now() - written < SHIM_REFRESH_MS)
      await new Promise((r) => setTimeout(r, 1));
  }

  /** Moves the clock by `deltaMs` from its current offset (see {@link set}). */
  shift(deltaMs: number): Promise<void> {
    return this.set(this.offset + deltaMs);
  }

  /** Removes the offset file (a process still under the shim then reads offset 0). */
  dispose(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Replaces the file atomically (temp file + rename): the shim never reads half a number. */
  private write(ms: number): void {
    if (!Number.isSafeInteger(ms)) throw new RangeError(`clock offset must be whole ms: ${ms}`);
    const temp = `${this.file}.${++this.writes}.tmp`;
    try {
      writeFileSync(temp, `${ms}\n`);
      renameSync(temp, this.file);
    } catch (err) {
      try {
        unlinkSync(temp);
      } catch {
        // never written
      }
      throw err;
    }
    this.offset = ms;
  }
}

/**
 * Throws unless the shim is mapped into process `pid` (Linux /proc): a server started without it
 * (the environment did not reach it) would otherwise make a clock test pass or fail for the
 * wrong reason.
 */
export function assertUnderClockShift(pid: number | undefined): void {
  if (!pid) throw new Error('process not running');
  const maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
  if (!maps.includes(clockShiftLibrary()))
    throw new Error(`process ${pid} does not have clock-shift.so loaded`);
}

/** Starts one master under the shim with its own clock (offset `initialMs`). */
export async function startClockMaster(
  initialMs = 0,
  options: MastersOptions = {},
): Promise<{ master: RedisMaster; clock: ClockControl }> {
  for (let attempt = 1; ; attempt++) {
    const clock = new ClockControl(initialMs);
    const master = new RedisMaster(await freePort(), {
      ...options,
      env: { ...options.env, ...clock.env(options.env) },
    });
    try {
      await master.start();
      assertUnderClockShift(master.pid);
      return { master, clock };
    } catch (err) {
      await master.kill();
      master.cleanup();
      clock.dispose();
      // Another process took the port between freePort and the start: try fresh ports.
      if (!(err instanceof PortTakenError) || attempt >= 3) throw err;
    }
  }
}

/**
 * N independent masters, each under the shim with its own clock (all at offset 0 to begin with),
 * plus clients for them; the counterpart of RedisMasters for the clock tests. The masters are
 * plain RedisMaster objects: kill, pause and restart work as usual, and a restarted master keeps
 * its clock's offset (same file).
 */
export class ClockMasters {
  private readonly clients: Redis[] = [];

  private constructor(
    readonly masters: RedisMaster[],
    readonly clocks: ClockControl[],
  ) {}

  /** Starts `n` masters on free loopback ports. */
  static async start(n: number, options: MastersOptions = {}): Promise<ClockMasters> {
    const started = await Promise.allSettled(
      Array.from({ length: n }, () => startClockMaster(0, options)),
    );
    const ok = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const set = new ClockMasters(
      ok.map((s) => s.master),
      ok.map((s) => s.clock),
    );
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) {
      await set.stop();
      throw failed.reason;
    }
    return set;
  }

  /** Connection URLs of the masters. */
  get urls(): string[] {
    return this.masters.map((m) => m.url);
  }

  /**
   * One ioredis client per master with the same lock-friendly settings as
   * RedisMasters.createClients (redis-masters.ts `lockClients`); closed by {@link stop}.
   */
  createClients(overrides: RedisOptions = {}): Redis[] {
    const clients = lockClients(this.masters, overrides);
    this.clients.push(...clients);
    return clients;
  }

  /** Closes the clients made here, kills every master, removes the data and the clock files. */
  async stop(): Promise<void> {
    await Promise.all(this.clients.splice(0).map((c) => closeClient(c)));
    await Promise.all(this.masters.map((m) => m.kill()));
    for (const m of this.masters) m.cleanup();
    for (const c of this.clocks) c.dispose();
  }
}
