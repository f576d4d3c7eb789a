/**
 * Safety soak controller: starts 5 masters and a separate counter server, forks K worker processes
 * that contend for one resource, injects faults while they run, then checks the logs.
 *
 * Faults, cycled in this order with about a second between them (protocol.ts, FAULT_KINDS):
 * - `restart-majority`: a worker is asked for a `long` section (ttl 1.5 s); right after it enters,
 *   3 of the 5 masters (those that voted for it first) are SIGKILLed and restarted empty at once.
 * - `pause-master`: SIGSTOP one master for 0.3–1 s, then SIGCONT.
 * - `bare-majority-restart`: 2 masters refuse scripts (ACL `-@scripting`: a partition where
 *   requests fail fast) while a worker acquires a `long` section, so its lock lives on exactly 3
 *   masters; the partition heals and 1 of those 3 is SIGKILLed and restarted empty.
 * - `pause-holder`: a worker is asked for a `hold` section; right after it enters, the worker
 *   process is SIGSTOPped past its whole ttl, then resumed.
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
import { RedisMaster, RedisMasters, freePort } from '../harness/redis-masters';
import { ROOT, buildWorker } from './build';
import { CheckReport, CounterState, checkRun } from './checker';
import {
  ACCEPTED_KEY,
  COUNTER_KEY,
  ControllerMessage,
  FAULT_KINDS,
  FaultEvent,
  FaultKind,
  SectionMode,
  TIMING,
  WORKER_ENV,
  WorkerConfig,
  WorkerMessage,
  monoMs,
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
}

/** Result of {@link runSoak}. */
export interface SoakResult {
  readonly report: CheckReport;
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
}

type EnterWaiter = (w: WorkerHandle) => void;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const between = (lo: number, hi: number): number => Math.round(lo + Math.random() * (hi - lo));
const pick = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)];
const shuffle = <T>(list: readonly T[]): T[] =>
  list
    .map((v) => ({ v, k: Math.random() }))
    .sort((a, b) => a.k - b.k)
    .map((x) => x.v);

/** Runs one soak and checks it. Never leaves a process behind. */
export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const began = Date.now();
  const log = options.log ?? (() => undefined);
  const workerCount = options.workers ?? 3;
  const kinds = options.faults?.length ? options.faults : FAULT_KINDS;
  const dir = mkdtempSync(join(tmpdir(), 'redlock-safety-'));
  const faultLog = join(dir, 'faults.jsonl');
  const workers: WorkerHandle[] = [];
  const enterWaiters = new Set<{ mode: SectionMode; resolve: EnterWaiter }>();
  const killAll = (): void => {
    for (const w of workers) {
      w.proc.kill('SIGCONT');
      w.proc.kill('SIGKILL');
    }
  };
  process.once('exit', killAll);

  let masters: RedisMasters | undefined;
  let counterServer: RedisMaster | undefined;
  try {
    masters = await RedisMasters.start(5);
    counterServer = new RedisMaster(await freePort());
    await counterServer.start();
    const m = masters;
    const admin = m.createClients(); // closed by masters.stop()
    log(
      `masters on ports ${m.masters.map((x) => x.port).join(', ')}; counter on ${counterServer.port}`,
    );

    // Workers.
    const workerJs = buildWorker(join(dir, 'build'));
    const ready: Promise<void>[] = [];
    for (let id = 0; id < workerCount; id++) {
      const config: WorkerConfig = {
        id,
        masterPorts: m.masters.map((x) => x.port),
        counterPort: counterServer.port,
        noQuarantine: options.noQuarantine ?? false,
        fairness: options.fairness ?? 'local',
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
      const handle: WorkerHandle = { id, proc, current: undefined, stderr: '' };
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
            }
          });
        }),
      );
    }
    await Promise.all(ready);
    log(
      `${workerCount} workers ready (fairness ${options.fairness ?? 'local'})${options.noQuarantine ? ' (quarantine OFF)' : ''}`,
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
    /** Asks a random worker for a section of `mode` and resolves once a worker enters one. */
    const holderIn = (mode: SectionMode, timeoutMs: number): Promise<WorkerHandle | undefined> => {
      const target = pick(workers);
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
    const record = (
      kind: FaultKind,
      t: number,
      wall: number,
      masterIdx: readonly number[],
      holder?: WorkerHandle,
      seq?: number,
      partitioned: readonly number[] = [],
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
      };
      appendFileSync(faultLog, JSON.stringify(event) + '\n');
      log(
        `fault ${kind} masters=[${masterIdx.join(',')}]${partitioned.length ? ` partitioned=[${partitioned.join(',')}]` : ''}${holder ? ` holder=worker ${holder.id} #${seq}` : ''} ${Math.round(event.duration)} ms`,
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
          record(kind, t, wall, targets, holder, seq);
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
          record(kind, t, wall, [target], holder, seq, partitioned);
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

    // Fault schedule.
    const until = monoMs() + options.durationMs;
    let halt = false;
    const faults = (async () => {
      await sleep(500);
      for (let n = 0; monoMs() < until && !halt; n++) {
        await inject(kinds[n % kinds.length]);
        await sleep(between(700, 1200));
      }
    })();
    const early = await Promise.race([faults.then(() => undefined), ...crashed]);
    if (early) {
      halt = true;
      await faults;
      throw new Error(early);
    }

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
    } finally {
      client.disconnect();
    }
  } finally {
    killAll();
    process.removeListener('exit', killAll);
    rmSync(join(dir, 'build'), { recursive: true, force: true });
    await masters?.stop();
    await counterServer?.kill();
    counterServer?.cleanup();
  }

  const report = checkRun(dir);
  const logsKept = options.keepLogs === true || report.violations.length > 0;
  if (!logsKept) rmSync(dir, { recursive: true, force: true });
  return { report, dir, logsKept, elapsedMs: Date.now() - began };
}
