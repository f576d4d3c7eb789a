/**
 * Safety soak controller: starts 5 masters (each under the wall-clock shim, with its own clock:
 * test/harness/faults/clock-shift.ts) and a separate data server (the counter and the fenced
 * resource), starts one link proxy per worker × master (test/harness/faults/link-proxy.ts),
 * forks K worker processes that contend for one resource through their own links, injects faults
 * while they run, then checks the logs.
 *
 * Faults, cycled in this order with about a second between them (protocol.ts, FAULT_KINDS):
 * - `restart-majority`: a worker is asked for a `long` section (ttl 1.5 s); right after it enters,
 *   3 of the 5 masters (those that voted for it first) are SIGKILLed and restarted empty at once,
 *   and another worker's probe engine contends right away.
 * - `partition-minority` / `partition-majority`: one worker's links to 2 (resp. 3) of the 5
 *   masters are cut for 1–2 s, then healed: blackholed both ways, client → master only or
 *   master → client only (bytes held and delivered late, or dropped and the connection reset on
 *   healing), or refused. The worker is the current holder half of the time.
 * - `pause-master`: SIGSTOP one master for 0.3–1 s, then SIGCONT.
 * - `clock-jump`: a worker acquires a `long` section while its links to 2 masters refuse, so its
 *   lock lives on exactly 3; one of those 3 masters' wall clock jumps 30 s forward (its key
 *   expires at once), and another worker's probe engine — warm (it has read every master's clock
 *   before) or fresh — contends right away: the case of the published Redlock critique
 *   (docs/REDLOCK.md, "Clocks"; issue 53). Once the holder's section ended the clock is set
 *   back (a jump the other way).
 * - `bare-majority-restart`: 2 masters refuse scripts (ACL `-@scripting`: a partition where
 *   requests fail fast) while a worker acquires a `long` section, so its lock lives on exactly 3
 *   masters; the partition heals, 1 of those 3 is SIGKILLed and restarted empty, and a probe
 *   contends right away.
 * - `pause-holder`: a worker is asked for a `hold` section; right after it enters, the worker
 *   process is SIGSTOPped past its whole ttl, then resumed.
 * - `clock-jump-back`: the same set-up as `clock-jump`; the master jumps 30 s back (its keys now
 *   outlive their ttl), a probe contends, and once the holder's section ended the master is
 *   killed and restarted empty under its late clock, so that its fencing counters are born again
 *   from a clock 30 s behind; 1.5 s later its clock is set right (a jump forward).
 *   Each clock fault sets its master's clock back as it was: between them every clock is on time
 *   (a master whose clock is off the others' does not vote, so faults that need it would fail).
 * - `minority-down`: SIGKILL 2 masters, keep them down 1–2.5 s, restart them empty.
 * - `pause-worker`: SIGSTOP a random worker at a random moment (acquiring, extending, releasing,
 *   holding, ...) for 0.3–0.9 s.
 *
 * The two restarts are REDLOCK.md's "Crash recovery" case (A on r1 r2 r3; r3 restarts empty; B wins
 * r3 r4 r5): without quarantine a contender wins a majority that includes fresh masters while the
 * holder is still inside its validity window; with quarantine (the default) fresh masters do not
 * vote for about maxTtl, by which time every lock they held has expired.
 */
import { ChildProcess, fork } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { ClockMasters } from '../harness/faults/clock-shift';
import { LinkMatrix, PartitionMode } from '../harness/faults/link-proxy';
import { RedisMaster, RedisMasters, freePort } from '../harness/redis-masters';
import { ROOT, cachedWorker } from './build';
import { CheckReport, CounterState, FencedRecord, checkRun } from './checker';
import {
  ACCEPTED_KEY,
  COUNTER_KEY,
  ControllerMessage,
  FAULT_KINDS,
  FENCED_KEY,
  FaultEvent,
  FaultKind,
  SectionMode,
  TIMING,
  WORKER_ENV,
  WorkerConfig,
  WorkerMessage,
  monoMs,
  seededRandom,
} from './protocol';

/** Options of {@link runSoak}. */
export interface SoakOptions {
  /** How long faults are injected (ms); the run ends after the fault in progress. */
  readonly durationMs: number;
  /** Number of worker processes. Default 3. */
  readonly workers?: number;
  /** Workers pass `quarantine: false` (deliberately broken variant). Default false. */
  readonly noQuarantine?: boolean;
  /** The workers' `fairness` setting. Default `'local'` (the engine's default). */
  readonly fairness?: 'local' | 'across-processes';
  /** Where progress lines go. Default: nowhere. */
  readonly log?: (line: string) => void;
  /** Fault kinds to cycle through, in order. Default: all ({@link FAULT_KINDS}). */
  readonly faults?: readonly FaultKind[];
  /** Keep the log directory even when no violation was found. Default false. */
  readonly keepLogs?: boolean;
  /**
   * `false`: the workers' engines run with `clockCheck: false` (deliberately broken variant for
   * the clock faults). Default true (the engine's default).
   */
  readonly clockCheck?: boolean;
  /** Seed of the run's random choices (printed with the report). Default: a random one. */
  readonly seed?: number;
  /**
   * Go on past `durationMs` until every fault kind was injected (or skipped) this many times.
   * Default 0.
   */
  readonly minCycles?: number;
}

/** What a run was asked to do (`run.json` in its log directory). */
export interface RunInfo {
  readonly seed: number;
  readonly durationMs: number;
  readonly workers: number;
  readonly faults: readonly FaultKind[];
  readonly noQuarantine: boolean;
  readonly clockCheck: boolean;
  readonly fairness: 'local' | 'across-processes';
}

/** Result of {@link runSoak}. */
export interface SoakResult {
  readonly report: CheckReport;
  readonly run: RunInfo;
  /** Log directory (removed unless violations were found or `keepLogs`). */
  readonly dir: string;
  readonly logsKept: boolean;
  /** Wall time of the whole run, including start-up and shutdown (ms). */
  readonly elapsedMs: number;
}

interface WorkerHandle {
  readonly id: number;
  readonly proc: ChildProcess;
  /** Section the worker is in, if any. */
  current: { seq: number; mode: SectionMode; okMasters: readonly number[] } | undefined;
  stderr: string;
  /** Resolves the pending probe request, if any. */
  probed: ((outcome: string) => void) | undefined;
}

type EnterWaiter = (w: WorkerHandle) => void;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** How a partition fault cuts the links: a name for the logs and the proxies' mode. */
const LINK_CUTS: readonly { readonly name: string; readonly mode: PartitionMode }[] = [
  ...(['both', 'up', 'down'] as const).flatMap((direction) =>
    (['hold', 'drop'] as const).map((bytes) => ({
      name: `blackhole-${direction}-${bytes}`,
      mode: { kind: 'blackhole', direction, bytes } as const,
    })),
  ),
  { name: 'refuse', mode: { kind: 'refuse', existing: 'reset' } },
];

/** Extra time a run may take beyond its fault duration before it is abandoned as hung (ms). */
const OVERRUN_MS = 90_000;

/** Runs one soak and checks it. Never leaves a process behind. */
export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const began = Date.now();
  const log = options.log ?? (() => undefined);
  const workerCount = options.workers ?? 3;
  const kinds = options.faults?.length ? options.faults : FAULT_KINDS;
  const seed = options.seed ?? Math.floor(Math.random() * 2 ** 31);
  const random = seededRandom(seed);
  const between = (lo: number, hi: number): number => Math.round(lo + random() * (hi - lo));
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)];
  const shuffle = <T>(list: readonly T[]): T[] =>
    list
      .map((v) => ({ v, k: random() }))
      .sort((a, b) => a.k - b.k)
      .map((x) => x.v);
  const run: RunInfo = {
    seed,
    durationMs: options.durationMs,
    workers: workerCount,
    faults: kinds,
    noQuarantine: options.noQuarantine ?? false,
    clockCheck: options.clockCheck ?? true,
    fairness: options.fairness ?? 'local',
  };
  const dir = mkdtempSync(join(tmpdir(), 'redlock-safety-'));
  writeFileSync(join(dir, 'run.json'), JSON.stringify(run) + '\n');
  const faultLog = join(dir, 'faults.jsonl');
  const fencedLog = join(dir, 'fenced.jsonl');
  const workers: WorkerHandle[] = [];
  const enterWaiters = new Set<{ mode: SectionMode; resolve: EnterWaiter }>();
  const killAll = (): void => {
    for (const w of workers) {
      w.proc.kill('SIGCONT');
      w.proc.kill('SIGKILL');
    }
  };
  process.once('exit', killAll);

  let masters: ClockMasters | undefined;
  let links: LinkMatrix | undefined;
  let counterServer: RedisMaster | undefined;
  let monitor: Redis | undefined;
  let watchdog: NodeJS.Timeout | undefined;
  try {
    masters = await ClockMasters.start(5);
    counterServer = new RedisMaster(await freePort());
    await counterServer.start();
    const m = masters;
    const admin = m.createClients(); // closed by masters.stop()
    links = await LinkMatrix.start(
      workerCount,
      m.masters.map((x) => x.port),
    );
    const l = links;
    log(
      `seed ${seed}; masters on ports ${m.masters.map((x) => x.port).join(', ')} (each under its own clock); data server on ${counterServer.port}; ${workerCount}×5 link proxies`,
    );

    // Every write the fenced resource accepted, in the server's order: fencedWrite's script
    // HSETs the hash only when it accepts, and MONITOR shows a script's commands as it runs them.
    const END_MARK = 'safety-soak-end';
    let endSeen: (() => void) | undefined;
    const monitorClient = new Redis({
      host: '127.0.0.1',
      port: counterServer.port,
      lazyConnect: true,
    });
    monitorClient.on('error', () => undefined);
    monitor = monitorClient;
    const monitoring = await monitorClient.monitor();
    monitoring.on('error', () => undefined);
    monitoring.on('monitor', (_time: string, args: string[], source: string) => {
      const command = args[0]?.toLowerCase();
      if (source === 'lua' && command === 'hset' && args[1] === FENCED_KEY) {
        const fields = new Map<string, string>();
        for (let i = 2; i + 1 < args.length; i += 2) fields.set(args[i], args[i + 1]);
        const record: FencedRecord = {
          token: Number(fields.get('fencingToken')),
          value: fields.get('value') ?? '',
        };
        appendFileSync(fencedLog, JSON.stringify(record) + '\n');
      } else if (command === 'echo' && args[1] === END_MARK) {
        endSeen?.();
      }
    });
    monitor = monitoring;
    monitorClient.disconnect(); // the monitoring connection is a duplicate of its own

    // Workers.
    const workerJs = cachedWorker();
    const ready: Promise<void>[] = [];
    for (let id = 0; id < workerCount; id++) {
      const config: WorkerConfig = {
        id,
        masterPorts: l.ports(id),
        counterPort: counterServer.port,
        noQuarantine: run.noQuarantine,
        fairness: run.fairness,
        clockCheck: run.clockCheck,
        seed: (seed + 7919 * (id + 1)) >>> 0,
        logFile: join(dir, `worker-${id}.jsonl`),
      };
      const proc = fork(workerJs, [], {
        execArgv: [],
        env: {
          ...process.env,
          NODE_PATH: join(ROOT, 'node_modules'),
          [WORKER_ENV]: JSON.stringify(config),
        },
        stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      });
      const handle: WorkerHandle = {
        id,
        proc,
        current: undefined,
        stderr: '',
        probed: undefined,
      };
      proc.stderr?.on('data', (d: Buffer) => (handle.stderr = (handle.stderr + d).slice(-4000)));
      workers.push(handle);
      ready.push(
        new Promise<void>((resolve, reject) => {
          proc.once('exit', (code, signal) =>
            reject(
              new Error(`worker ${id} exited (${code ?? signal}) before ready: ${handle.stderr}`),
            ),
          );
          proc.on('message', (msg: WorkerMessage) => {
            if (msg.type === 'ready') resolve();
            else if (msg.type === 'enter') {
              handle.current = { seq: msg.seq, mode: msg.mode, okMasters: msg.okMasters };
              for (const waiter of [...enterWaiters]) {
                if (waiter.mode === msg.mode) {
                  enterWaiters.delete(waiter);
                  waiter.resolve(handle);
                }
              }
            } else if (msg.type === 'exit' && handle.current?.seq === msg.seq) {
              handle.current = undefined;
            } else if (msg.type === 'probed') {
              handle.probed?.(msg.outcome);
            }
          });
        }),
      );
    }
    await Promise.all(ready);
    log(
      `${workerCount} workers ready (fairness ${run.fairness})${run.noQuarantine ? ' (quarantine OFF)' : ''}${run.clockCheck ? '' : ' (clock check OFF)'}`,
    );
    const crashed = workers.map(
      (w) =>
        new Promise<string>((resolve) =>
          w.proc.once('exit', (code, signal) =>
            resolve(`worker ${w.id} exited early (${code ?? signal}): ${w.stderr}`),
          ),
        ),
    );

    const tell = (w: WorkerHandle, msg: ControllerMessage): void => {
      if (w.proc.connected) w.proc.send(msg);
    };
    /** Asks `target` (default: a random worker) for a section of `mode`; resolves once it entered one. */
    const holderIn = (
      mode: SectionMode,
      timeoutMs: number,
      target = pick(workers),
    ): Promise<WorkerHandle | undefined> => {
      return new Promise((resolve) => {
        const waiter = {
          mode,
          resolve: (w: WorkerHandle) => {
            clearTimeout(timer);
            resolve(w);
          },
        };
        const timer = setTimeout(() => {
          enterWaiters.delete(waiter);
          tell(target, { type: 'mode', mode: 'normal' });
          resolve(undefined);
        }, timeoutMs);
        enterWaiters.add(waiter);
        tell(target, { type: 'mode', mode });
      });
    };
    /** Asks `w`'s probe engine to contend once; resolves with its outcome (or 'no answer'). */
    const probeBy = (w: WorkerHandle, fresh: boolean, timeoutMs: number): Promise<string> =>
      new Promise((resolve) => {
        const timer = setTimeout(() => done('no answer'), timeoutMs);
        function done(outcome: string): void {
          clearTimeout(timer);
          w.probed = undefined;
          resolve(outcome);
        }
        w.probed = done;
        tell(w, { type: 'probe', fresh });
      });
    /**
     * A contender for right after a fault under `holder`: another worker's probe engine, warm or
     * fresh (REDLOCK.md "Crash recovery"'s B; the clock critique's B).
     */
    const contender = (holder: WorkerHandle): { worker: number; fresh: boolean } => ({
      worker: pick(workers.filter((w) => w !== holder)).id,
      fresh: random() < 0.5,
    });
    const probed = async (probe: { worker: number; fresh: boolean }, kind: FaultKind) => {
      const outcome = await probeBy(workers[probe.worker], probe.fresh, 5000);
      if (outcome === 'no answer') log(`${kind}: worker ${probe.worker}'s probe did not answer`);
    };
    /** Polls `condition` every 10 ms for at most `timeoutMs`. */
    const until = async (condition: () => boolean, timeoutMs: number): Promise<boolean> => {
      const deadline = monoMs() + timeoutMs;
      while (!condition()) {
        if (monoMs() > deadline) return false;
        await sleep(10);
      }
      return true;
    };
    const record = (
      kind: FaultKind,
      t: number,
      wall: number,
      masterIdx: readonly number[],
      holder?: WorkerHandle,
      seq?: number,
      partitioned: readonly number[] = [],
      extra: Pick<FaultEvent, 'link' | 'clock' | 'probe'> = {},
    ): void => {
      const event: FaultEvent = {
        ev: 'fault',
        kind,
        t,
        wall,
        duration: monoMs() - t,
        masters: masterIdx,
        partitioned,
        worker: holder ? holder.id : null,
        seq: seq ?? null,
        ...extra,
      };
      appendFileSync(faultLog, JSON.stringify(event) + '\n');
      const details = [
        extra.link,
        extra.clock &&
          `clock ${extra.clock.jumpMs > 0 ? '+' : ''}${extra.clock.jumpMs / 1000} s → offset ${extra.clock.offsetMs / 1000} s, then set back`,
        extra.probe &&
          `probe=worker ${extra.probe.worker} (${extra.probe.fresh ? 'fresh' : 'warm'})`,
      ].filter(Boolean);
      log(
        `fault ${kind} masters=[${masterIdx.join(',')}]${partitioned.length ? ` partitioned=[${partitioned.join(',')}]` : ''}${holder ? ` worker ${holder.id}${seq === undefined ? '' : ` #${seq}`}` : ''}${details.length ? ` ${details.join(' ')}` : ''} ${Math.round(event.duration)} ms`,
      );
    };

    const inject = async (kind: FaultKind): Promise<void> => {
      const all = m.masters.map((_, i) => i);
      switch (kind) {
        case 'pause-master': {
          const i = pick(all);
          const t = monoMs();
          const wall = Date.now();
          m.masters[i].pause();
          await sleep(between(300, 1000));
          m.masters[i].resume();
          record(kind, t, wall, [i]);
          return;
        }
        case 'minority-down': {
          const targets = shuffle(all).slice(0, 2);
          const t = monoMs();
          const wall = Date.now();
          await Promise.all(targets.map((i) => m.masters[i].stopFor(between(1000, 2500))));
          record(kind, t, wall, targets);
          return;
        }
        case 'restart-majority': {
          const holder = await holderIn('long', 8000);
          if (!holder?.current) return log(`${kind} skipped: no long section began`);
          const { seq, okMasters } = holder.current;
          const targets = [
            ...okMasters,
            ...shuffle(all.filter((i) => !okMasters.includes(i))),
          ].slice(0, 3);
          const t = monoMs();
          const wall = Date.now();
          await Promise.all(targets.map((i) => m.masters[i].restart()));
          const probe = contender(holder);
          record(kind, t, wall, targets, holder, seq, [], { probe });
          await probed(probe, kind);
          return;
        }
        case 'bare-majority-restart': {
          const partitioned = shuffle(all).slice(0, 2);
          const acl = async (rule: string): Promise<void> => {
            await RedisMasters.ready(partitioned.map((i) => admin[i]));
            await Promise.all(
              partitioned.map((i) => admin[i].call('ACL', 'SETUSER', 'default', rule)),
            );
          };
          await acl('-@scripting');
          let holder: WorkerHandle | undefined;
          try {
            holder = await holderIn('long', 8000);
          } finally {
            await acl('+@all');
          }
          if (!holder?.current) return log(`${kind} skipped: no long section began`);
          const { seq, okMasters } = holder.current;
          const target = pick(okMasters);
          const t = monoMs();
          const wall = Date.now();
          await m.masters[target].restart();
          const probe = contender(holder);
          record(kind, t, wall, [target], holder, seq, partitioned, { probe });
          await probed(probe, kind);
          return;
        }
        case 'pause-worker': {
          const w = pick(workers);
          const seq = w.current?.seq;
          const t = monoMs();
          const wall = Date.now();
          w.proc.kill('SIGSTOP');
          await sleep(between(300, 900));
          w.proc.kill('SIGCONT');
          record(kind, t, wall, [], seq === undefined ? undefined : w, seq);
          return;
        }
        case 'partition-minority':
        case 'partition-majority': {
          // The holder half of the time (it must then learn it lost the lock, or keep it), a
          // random worker otherwise (acquiring, releasing or waiting across the cut).
          const holding = workers.filter((w) => w.current);
          const w = holding.length > 0 && random() < 0.5 ? pick(holding) : pick(workers);
          const seq = w.current?.seq;
          const cut = shuffle(all).slice(0, kind === 'partition-minority' ? 2 : 3);
          const how = pick(LINK_CUTS);
          const t = monoMs();
          const wall = Date.now();
          await l.partition(w.id, cut, how.mode);
          await sleep(between(1000, 2000));
          await l.heal(w.id);
          record(kind, t, wall, [], w, seq, cut, { link: how.name });
          return;
        }
        case 'clock-jump':
        case 'clock-jump-back': {
          const forward = kind === 'clock-jump';
          // Every master's clock is on time between the clock faults (each sets its own back).
          const target = pick(all);
          // The holder's lock must live on exactly 3 masters, the jumped one among them: its links
          // to 2 others refuse while it acquires.
          const cut = shuffle(all.filter((i) => i !== target)).slice(0, 2);
          const chosen = pick(workers);
          await l.partition(chosen.id, cut, { kind: 'refuse', existing: 'reset' });
          let holder: WorkerHandle | undefined;
          try {
            holder = await holderIn('long', 8000, chosen);
          } finally {
            await l.heal(chosen.id);
          }
          const h = holder;
          if (!h?.current) return log(`${kind} skipped: no long section began`);
          const { seq, okMasters } = h.current;
          if (!okMasters.includes(target))
            return log(`${kind} skipped: the holder's lock is not on master ${target}`);
          const jumpMs = forward ? TIMING.clockJump : -TIMING.clockJump;
          const t = monoMs();
          const wall = Date.now();
          await m.clocks[target].shift(jumpMs);
          // The critique's client B: another process contends right after the jump.
          const probe = contender(h);
          await probed(probe, kind);
          await until(() => h.current?.seq !== seq, 5000);
          const offsetMs = m.clocks[target].offsetMs;
          if (!forward) {
            // Its fencing counters are born again from a clock 30 s behind: restarted empty, it
            // starts none for a second (a data set that young starts none), then the workers'
            // acquires start them.
            await m.masters[target].restart();
            await sleep(1500);
          }
          // The clock is set right again, itself a jump the other way: an engine that read the
          // master during the fault and not after it sees a jump at its next reading; keys set
          // during a forward jump now outlive their ttl by 30 s.
          await m.clocks[target].shift(-jumpMs);
          record(kind, t, wall, [target], h, seq, cut, { clock: { offsetMs, jumpMs }, probe });
          return;
        }
        case 'pause-holder': {
          const holder = await holderIn('hold', 8000);
          if (!holder?.current) return log(`${kind} skipped: no hold section began`);
          const { seq } = holder.current;
          const t = monoMs();
          const wall = Date.now();
          holder.proc.kill('SIGSTOP');
          await sleep(TIMING.holderPause);
          holder.proc.kill('SIGCONT');
          record(kind, t, wall, [], holder, seq);
          return;
        }
      }
    };

    // Fault schedule. Every fault is bounded in time; the watchdog bounds the whole run.
    const end = monoMs() + options.durationMs;
    let halt = false;
    const faults = (async () => {
      await sleep(500);
      const minFaults = (options.minCycles ?? 0) * kinds.length;
      for (let n = 0; (monoMs() < end || n < minFaults) && !halt; n++) {
        await inject(kinds[n % kinds.length]);
        await sleep(between(700, 1200));
      }
    })();
    const hung = new Promise<string>((resolve) => {
      watchdog = setTimeout(
        () => resolve(`the run did not end within ${OVERRUN_MS / 1000} s of its duration`),
        options.durationMs + OVERRUN_MS + (options.minCycles ?? 0) * kinds.length * 15_000,
      );
    });
    const early = await Promise.race([faults.then(() => undefined), hung, ...crashed]);
    if (early) {
      halt = true;
      await Promise.race([faults, sleep(15_000)]);
      throw new Error(early);
    }
    await l.heal();

    // Stop the workers, then read the counter.
    for (const w of workers) {
      w.proc.kill('SIGCONT');
      tell(w, { type: 'stop' });
    }
    let timer: NodeJS.Timeout | undefined;
    const stopped = await Promise.race([
      Promise.all(crashed).then(() => true),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 15_000))),
    ]);
    clearTimeout(timer);
    if (!stopped) throw new Error('workers did not stop within 15 s');
    const codes = workers.map((w) => w.proc.exitCode);
    if (codes.some((c) => c !== 0)) {
      throw new Error(
        `worker exit codes ${codes.join(', ')}: ${workers.map((w) => w.stderr).join('\n')}`,
      );
    }
    const client = new Redis({ host: '127.0.0.1', port: counterServer.port, lazyConnect: true });
    try {
      await client.connect();
      const [value, accepted] = await client.mget(COUNTER_KEY, ACCEPTED_KEY);
      const state: CounterState = { value: Number(value ?? 0), accepted: Number(accepted ?? 0) };
      writeFileSync(join(dir, 'counter.json'), JSON.stringify(state) + '\n');
      // Every accepted fenced write is in fenced.jsonl once MONITOR showed a command sent after
      // the workers stopped.
      const seen = new Promise<boolean>((resolve) => {
        endSeen = () => resolve(true);
        setTimeout(() => resolve(false), 10_000).unref();
      });
      await client.echo(END_MARK);
      if (!(await seen)) throw new Error('MONITOR of the data server fell behind by over 10 s');
      const last = await client.hget(FENCED_KEY, 'fencingToken');
      writeFileSync(
        join(dir, 'fenced-final.json'),
        JSON.stringify({ token: last === null ? null : Number(last) }) + '\n',
      );
    } finally {
      client.disconnect();
    }
  } finally {
    clearTimeout(watchdog);
    killAll();
    process.removeListener('exit', killAll);
    monitor?.disconnect();
    await links?.close();
    await masters?.stop();
    await counterServer?.kill();
    counterServer?.cleanup();
  }

  const report = checkRun(dir);
  const logsKept = options.keepLogs === true || report.violations.length > 0;
  if (!logsKept) rmSync(dir, { recursive: true, force: true });
  return { report, run, dir, logsKept, elapsedMs: Date.now() - began };
}
