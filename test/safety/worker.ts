/**
 * Safety soak worker: one OS process that contends for {@link RESOURCE} through the public API
 * (`Redlock.using`) in a loop and logs every critical section (see protocol.ts).
 *
 * Inside a section it does a deliberately non-atomic read-modify-write of a counter on a separate
 * redis-server: GET at the start, work, then SET value+1. Two holders at once lose an
 * update. The SET is skipped when `lock.signal` says the lock ended, and the counter server refuses
 * it when it arrives after the lock's validity end (a pause can land between the check and the
 * write; refusing late writes is the storage's part, as fencing is).
 *
 * Every section ends with a write through the engine's `fencedWrite` to a hash on the same server
 * ({@link FENCED_KEY}), made whatever the signal says: a holder that lost its lock, knowingly or
 * not, must have its write refused when a newer token already wrote.
 *
 * The worker reaches the masters through its own link proxies (the controller cuts them for the
 * partition faults). A second engine, the probe, contends once when the controller asks, right
 * after a fault aimed at a holder (a restart, a clock jump): warm (made at start, so it has read
 * every master's clock before) or fresh (made for that probe).
 *
 * Started by controller.ts with `fork()`; configured through the REDLOCK_SAFETY_WORKER variable.
 */
import { appendFileSync } from 'node:fs';
import Redis from 'ioredis';
import { Lock, Redlock, RedlockSettings, fencedWrite } from '../../lib';
import {
  ACCEPTED_KEY,
  COUNTER_KEY,
  ControllerMessage,
  FENCED_KEY,
  FencedOutcome,
  KEY_PREFIX,
  RESOURCE,
  SectionMode,
  TIMING,
  WORKER_ENV,
  WorkerConfig,
  WorkerEvent,
  WarnEvent,
  WorkerMessage,
  WriteOutcome,
  monoMs,
  seededRandom,
} from './protocol';

/** Sets the counter only while the server clock is not past the writer's validity end. */
const WRITE_BEFORE_DEADLINE = `
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if nowMs > tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
return 1
`;

const config = JSON.parse(process.env[WORKER_ENV] ?? 'null') as WorkerConfig | null;
if (!config) throw new Error(`${WORKER_ENV} is not set: start workers through controller.ts`);
const cfg: WorkerConfig = config;
const random = seededRandom(cfg.seed);

const log = (event: WorkerEvent): void => appendFileSync(cfg.logFile, JSON.stringify(event) + '\n');
const send = (message: WorkerMessage): void => {
  if (process.connected) process.send?.(message);
};
const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
const nameOf = (err: unknown): string => (err instanceof Error ? err.name : typeof err);

/** One client per master, through this worker's link proxies. */
const masterClients = (): Redis[] =>
  cfg.masterPorts.map((port) => {
    const c = new Redis({
      host: '127.0.0.1',
      port,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
      disconnectTimeout: 100,
    });
    c.on('error', () => undefined);
    return c;
  });
const masters = masterClients();
const counter = new Redis({ host: '127.0.0.1', port: cfg.counterPort, maxRetriesPerRequest: 1 });
counter.on('error', () => undefined);

/** An engine's logger: its warnings go to the log (the checker counts the clock detections). */
function logger(engine: WarnEvent['engine']): RedlockSettings['logger'] {
  return {
    warn: (message: string) => log({ ev: 'warn', worker: cfg.id, engine, t: monoMs(), message }),
  };
}

const settings: RedlockSettings = {
  ttl: TIMING.ttl,
  maxTtl: TIMING.maxTtl,
  retryCount: 1_000_000,
  retryDelay: 30,
  retryJitter: 20,
  requestTimeout: 50,
  keyPrefix: KEY_PREFIX,
  quarantine: !cfg.noQuarantine,
  // The deliberately broken variant turns off the self-healing extension too: a repair that
  // lands between the partition healing and the restart puts the key back on the partitioned
  // masters and so hides the crash-recovery case this variant must show (REDLOCK.md: A on r1 r2
  // r3, r3 restarts empty, B wins r3 r4 r5). With the defaults both are on.
  repairOnExtend: !cfg.noQuarantine,
  fairness: cfg.fairness,
  logger: logger('main'),
  // false: the deliberately broken variant for the clock faults (cli.ts --no-clock-check).
  clockCheck: cfg.clockCheck,
};
const redlock = new Redlock(masters, settings);
/** The warm probe: an engine of its own that has read every master's clock before it probes. */
const probeMasters = masterClients();
const probe = new Redlock(probeMasters, { ...settings, logger: logger('probe') });

let nextMode: SectionMode = 'normal';
let seq = 0;
const stopping = new AbortController();
let probing: Promise<void> | undefined;
process.on('message', (message: ControllerMessage) => {
  if (message.type === 'mode') nextMode = message.mode;
  else if (message.type === 'probe') probing ??= runProbe(message.fresh);
  else if (message.type === 'stop') stopping.abort();
});
// The controller died: nothing left to report to.
process.on('disconnect', () => process.exit(1));

const ready = async (clients: readonly Redis[]): Promise<void> => {
  const deadline = Date.now() + 10_000;
  while (!clients.every((c) => c.status === 'ready')) {
    if (Date.now() > deadline) throw new Error('worker: Redis clients not ready');
    await sleep(10);
  }
};

/**
 * One contention of the probe engine (warm, or a fresh one made for it) for the resource, right
 * after a fault aimed at a holder: REDLOCK.md "Crash recovery"'s client B after a restart, the
 * published Redlock critique's after a clock jump — it tries while the holder's key is gone from
 * a restarted or jumped master. Logged like any section when granted.
 */
async function runProbe(fresh: boolean): Promise<void> {
  const t = monoMs();
  let outcome = 'granted';
  const clients = fresh ? masterClients() : probeMasters;
  const engine = fresh ? new Redlock(clients, { ...settings, logger: logger('fresh') }) : probe;
  try {
    if (fresh) await ready(clients);
    await engine.using(RESOURCE, (signal, lock) => section(signal, lock, 'probe'), {
      ttl: TIMING.ttl,
      waitTimeout: TIMING.probeWait,
      signal: stopping.signal,
    });
  } catch (err) {
    outcome = nameOf(err);
  } finally {
    if (fresh) {
      await engine.close();
      for (const c of clients) c.disconnect();
    }
  }
  log({ ev: 'probe', worker: cfg.id, t, fresh, outcome });
  send({ type: 'probed', outcome });
  probing = undefined;
}

async function section(signal: AbortSignal, lock: Lock, mode: SectionMode): Promise<void> {
  // Validity read first, clock second: the recorded end is never earlier than the engine's.
  const remaining = lock.remainingValidity;
  const start = monoMs();
  const wallStart = Date.now();
  let validityEnd = start + remaining;
  /** Notes the validity end promised now (extensions move it); returns the ms left. */
  const note = (): number => {
    const left = lock.remainingValidity;
    const t = monoMs();
    if (left > 0) validityEnd = Math.max(validityEnd, t + left);
    return left;
  };
  const n = ++seq;
  if (nextMode === mode) nextMode = 'normal';
  // A probe's sections are its own business: the controller tracks the main loop's only.
  const tell = mode !== 'probe';
  let abortedAt: number | null = null;
  signal.addEventListener('abort', () => (abortedAt = monoMs()), { once: true });
  const okMasters = lock.votes.filter((v) => v.outcome === 'ok').map((v) => v.node);
  log({
    ev: 'enter',
    worker: cfg.id,
    seq: n,
    mode,
    ttl: lock.ttl,
    start,
    wall: wallStart,
    validityEnd,
    fencingToken: lock.fencingToken ?? null,
    okMasters,
    attempts: lock.attempts,
  });
  if (tell) send({ type: 'enter', seq: n, mode, okMasters });

  let read: number | null = null;
  let write: WriteOutcome = 'error';
  let error: string | null = null;
  let extendError: string | null = null;
  let fenced: FencedOutcome = 'none';
  let fencedAt: number | null = null;
  const extend = async (): Promise<void> => {
    if (signal.aborted) return;
    try {
      await lock.extend();
      note();
    } catch (err) {
      extendError = nameOf(err);
    }
  };
  try {
    // Read, work, write: the update is lost if another holder writes in between.
    read = Number((await counter.get(COUNTER_KEY)) ?? 0);
    if (mode === 'auto') {
      // Longer than the ttl: `using()` extends in the background; watch the validity move.
      for (let i = 0; i < TIMING.autoWork / 50 && !signal.aborted; i++) {
        await sleep(50, signal);
        note();
      }
    } else {
      const work =
        mode === 'long'
          ? TIMING.longWork / 2
          : mode === 'hold'
            ? TIMING.holdWork
            : 5 + random() * 30;
      await sleep(work, signal);
    }
    // The `lock.signal` getter re-checks the validity deadline, also right after a pause.
    const left = note();
    if (lock.signal.aborted || left <= 0) {
      write = 'skipped';
    } else {
      const deadline = Math.floor(Date.now() + left); // wall ms, the counter server's clock
      const ok = await counter.eval(
        WRITE_BEFORE_DEADLINE,
        2,
        COUNTER_KEY,
        ACCEPTED_KEY,
        String(read + 1),
        String(deadline),
      );
      write = ok === 1 ? 'ok' : 'refused';
    }
    // Then keep holding for a while after one `extend()`: always in `long` sections (under the
    // restart faults), in a fifth of the `normal` ones.
    if (mode === 'long' || (mode === 'normal' && random() < 0.2)) {
      await extend();
      await sleep(mode === 'long' ? TIMING.longWork / 2 : 5 + random() * 20, signal);
    }
  } catch (err) {
    error = nameOf(err);
  }
  // The fenced write, whatever the signal says: the resource, not the holder, decides.
  const token = lock.fencingToken;
  if (token !== undefined) {
    fencedAt = monoMs();
    try {
      const ok = await fencedWrite(counter, FENCED_KEY, token, `${cfg.id}:${n}`);
      fenced = ok ? 'accepted' : 'refused';
    } catch (err) {
      fenced = 'error';
      error ??= nameOf(err);
    }
  }
  note();
  const end = monoMs();
  const aborted = lock.signal.aborted;
  const reason: unknown = lock.signal.reason;
  log({
    ev: 'exit',
    worker: cfg.id,
    seq: n,
    end,
    wall: Date.now(),
    validityEnd,
    aborted,
    abortedAt,
    abortReason: aborted ? (reason instanceof Error ? reason.message : String(reason)) : null,
    extensions: lock.extensions,
    extendError,
    read,
    write,
    fenced,
    fencedAt,
    error,
  });
  if (tell) send({ type: 'exit', seq: n });
}

async function main(): Promise<void> {
  await ready([...masters, ...probeMasters, counter]);
  // The warm probe reads every master's clock once before any fault.
  await probe.using(`${RESOURCE}-warm-${cfg.id}`, async () => undefined, { ttl: TIMING.ttl });
  send({ type: 'ready' });
  while (!stopping.signal.aborted) {
    const mode: SectionMode =
      nextMode === 'normal' && random() < TIMING.autoShare ? 'auto' : nextMode;
    try {
      await redlock.using(RESOURCE, (signal, lock) => section(signal, lock, mode), {
        ttl: mode === 'long' ? TIMING.longTtl : TIMING.ttl,
        autoExtend: mode === 'auto',
        waitTimeout: 3000,
        signal: stopping.signal,
      });
    } catch (err) {
      if (!stopping.signal.aborted)
        log({ ev: 'fail', worker: cfg.id, t: monoMs(), error: nameOf(err) });
    }
    await sleep(random() * 5);
  }
  await probing;
  await Promise.all([redlock.close(), probe.close()]);
  for (const c of [...masters, ...probeMasters, counter]) c.disconnect();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`safety worker ${cfg.id}:`, err);
    process.exit(2);
  },
);
