/**
 * The setup that the real-master engine suites share: `n` private redis-server masters, the
 * engines' clients, probe clients for looking at the keys directly, and an engine factory with
 * the suites' defaults. Registers its own beforeAll / afterAll: every engine it made is closed
 * and the masters are stopped after the file.
 */
import { afterAll, beforeAll } from '@jest/globals';
import type { Redis } from 'ioredis';
import { STORE_FACTORY } from '../../lib/core/store';
import type { RedlockClient } from '../../lib/core/base/settings';
import type { AttemptOutcome, AttemptRequest, StoreFactory } from '../../lib/core/store';
import { RedisStore } from '../../lib/core/redis/store';
import { FairRedisStore } from '../../lib/core/fair/fair-redis-store';
import { Redlock } from '../../lib/core/redlock';
import type { RedlockSettings } from '../../lib/core/base/settings';
import { RedisMasters } from './redis-masters';

/** Settings of the suites' engines, before a file's own defaults and a test's settings. */
export const SUITE_DEFAULTS: RedlockSettings = Object.freeze({
  // Fresh private masters: no lock predates them (restart quarantine has its own suites).
  quarantine: false,
  retryDelay: 20,
  retryJitter: 10,
  // Generous for a loaded 2-core CI machine; the timeout behaviour has its own fault suites.
  requestTimeout: 250,
});

/**
 * Settings of the fair suites' engines: {@link SUITE_DEFAULTS} with fairness across processes
 * (fair/fair-queue.ts, lib/core/fair/README.md).
 */
export const FAIR_DEFAULTS: RedlockSettings = Object.freeze({
  ...SUITE_DEFAULTS,
  fairness: 'across-processes',
});

/** What {@link useMasters} gives a test file (valid inside tests and hooks). */
export interface MasterSuite {
  readonly masters: RedisMasters;
  /** One client per master, for engines. */
  readonly clients: Redis[];
  /** One more client per master, to look at keys directly. */
  readonly probe: Redis[];
  /** An engine on `clients` (or `on`), closed after the file. */
  engine(settings?: RedlockSettings, on?: Redis[]): Redlock;
  /** {@link engine}, its masters checked already ({@link withCheckedMasters}). */
  checkedEngine(settings?: RedlockSettings, on?: Redis[]): Promise<Redlock>;
  /**
   * Runs `close` after the file, before the engines are closed and the masters stopped: for what
   * the file made over the masters itself (Nest applications, engines on other connections).
   * (A file's own afterAll declared after useMasters runs only once the masters are stopped.)
   */
  closeFirst(close: () => unknown): void;
}

/** Starts `n` masters for this test file; `defaults` go over {@link SUITE_DEFAULTS}. */
export function useMasters(n: number, defaults: RedlockSettings = {}): MasterSuite {
  let masters: RedisMasters | undefined;
  let clients: Redis[] = [];
  let probe: Redis[] = [];
  const engines: Redlock[] = [];
  const closers: (() => unknown)[] = [];
  const started = (): RedisMasters => {
    if (!masters) throw new Error('useMasters: the masters start in beforeAll');
    return masters;
  };
  beforeAll(async () => {
    masters = await RedisMasters.start(n);
    clients = masters.createClients();
    probe = masters.createClients();
    await RedisMasters.ready([...clients, ...probe]);
  });
  afterAll(async () => {
    await Promise.all(closers.map((close) => close()));
    await Promise.all(engines.map((e) => e.close()));
    await masters?.stop();
  });
  return {
    get masters() {
      return started();
    },
    get clients() {
      return clients;
    },
    get probe() {
      return probe;
    },
    engine(settings = {}, on = clients) {
      const rl = new Redlock(on, { ...SUITE_DEFAULTS, ...defaults, ...settings });
      engines.push(rl);
      return rl;
    },
    checkedEngine(settings = {}, on = clients) {
      return withCheckedMasters(this.engine(settings, on));
    },
    closeFirst(close) {
      closers.push(close);
    },
  };
}

/**
 * A Redis store over `clients` (the fair mode's with `fairness: 'across-processes'`) that
 * `instrument` may patch before the engine uses it (`new Redlock(storeWith(...), settings)`):
 * for tests that watch or delay what the store does.
 */
export function storeWith(
  clients: readonly RedlockClient[],
  instrument: (store: RedisStore) => void,
): StoreFactory {
  return {
    [STORE_FACTORY]: true,
    masters: clients.length,
    open: (resolved) => {
      const store =
        resolved.fairness === 'across-processes'
          ? new FairRedisStore(clients, resolved)
          : new RedisStore(clients, resolved);
      instrument(store);
      return store;
    },
  };
}

/**
 * {@link storeWith} for the fair mode's settings: `instrument` gets the fair mode's store (an
 * engine with other settings fails to open).
 */
export function fairStoreWith(
  clients: readonly RedlockClient[],
  instrument: (store: FairRedisStore) => void,
): StoreFactory {
  return storeWith(clients, (s) => {
    if (!(s instanceof FairRedisStore)) throw new Error('fairStoreWith: the fair mode only');
    instrument(s);
  });
}

/** Engines over the same masters with their stores (see {@link enginesOver}). */
export interface EngineSet {
  /** Each engine's store (the fair mode's), in the order of {@link locks}. */
  readonly all: FairRedisStore[];
  readonly locks: Redlock[];
  close(): Promise<void>;
}

/**
 * `rl`, once it took and released one lock on a resource of its own: its masters' checks after
 * connecting are done (redis/masters/master-checks.ts). A fresh engine's first attempt waits for
 * them, a master for the checks of those listed before it too, and an attempt refused by a quorum
 * before a master's check answered is never sent to that master (redis/masters/dispatch.ts
 * `afterCheck`): a test that expects every master to see an attempt starts from here.
 */
export async function withCheckedMasters(rl: Redlock): Promise<Redlock> {
  await (await rl.acquire(`engines-warm-up:${Math.random().toString(36).slice(2)}`)).release();
  return rl;
}

/**
 * `count` engines over `clients` — shared, or a new set per engine from a function (each engine
 * over its own connections, as separate processes would be) — with the fair suites' settings
 * ({@link FAIR_DEFAULTS}) and
 * `every` over them (the first one also `first`), each with a lock taken and released already,
 * so that their connections were checked.
 */
export async function enginesOver(
  clients: readonly RedlockClient[] | (() => readonly RedlockClient[]),
  count: number,
  first: RedlockSettings = {},
  every: RedlockSettings = {},
): Promise<EngineSet> {
  const all: FairRedisStore[] = [];
  const locks = Array.from(
    { length: count },
    (_, i) =>
      new Redlock(
        storeWith(typeof clients === 'function' ? clients() : clients, (s) => {
          if (!(s instanceof FairRedisStore)) throw new Error('enginesOver: the fair mode only');
          all.push(s);
        }),
        { ...FAIR_DEFAULTS, ...every, ...(i === 0 ? first : {}) },
      ),
  );
  for (const e of locks) await withCheckedMasters(e);
  return {
    all,
    locks,
    close: () => Promise.all(locks.map((e) => e.close())).then(() => undefined),
  };
}

/**
 * A Redis store over `clients` that shows `onAttempt` each attempt's request before making it
 * (`new Redlock(observedStore(...), settings)`), and `onOutcome` its outcome: for tests that
 * count or classify attempts.
 */
export function observedStore(
  clients: readonly RedlockClient[],
  onAttempt: (req: AttemptRequest) => void,
  onOutcome?: (req: AttemptRequest, outcome: AttemptOutcome) => void,
): StoreFactory {
  return storeWith(clients, (store) => observeAttempts(store, onAttempt, onOutcome));
}

/**
 * Shows `onAttempt` each attempt's request before `store` makes it, and `onOutcome` its outcome
 * (inside {@link storeWith}, beside other instruments of the same store).
 */
export function observeAttempts(
  store: RedisStore,
  onAttempt: (req: AttemptRequest) => void,
  onOutcome?: (req: AttemptRequest, outcome: AttemptOutcome) => void,
): void {
  const attempt = store.attempt.bind(store);
  store.attempt = async (req) => {
    onAttempt(req);
    const outcome = await attempt(req);
    onOutcome?.(req, outcome);
    return outcome;
  };
}
