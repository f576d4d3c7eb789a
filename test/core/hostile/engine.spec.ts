/**
 * Hostile input against the engine with 3 real masters.
 * Every bad call ends in a typed error naming the field, and nothing is written on any master:
 * before and after each call a PING on each of the engine's own connections (commands on one
 * connection run in order, so anything the engine sent before has been applied), then the
 * masters' keyspace is scanned: no master may hold a key it did not hold before the call.
 */
import {
  InvalidArgumentError,
  InvalidConfigurationError,
  LockContendedError,
  WaitTimeoutError,
} from '../../../lib/core/base/errors';
import type { RedlockEvent } from '../../../lib/core/lock/events';
import { fencedRead, fencedWrite } from '../../../lib/core/redis/fenced-write';
import { Lock } from '../../../lib/core/lock/lock';
import { Redlock } from '../../../lib/core/redlock';
import type { RedlockSettings } from '../../../lib/core/base/settings';
import { MAX_TIMER_MS } from '../../../lib/core/base/clock';
import { useMasters } from '../../harness/engines';
import { sleep, uniqueResource, keyspaceOf, newKeys } from '../../harness/util';

const suite = useMasters(3);
const engine = (settings?: RedlockSettings): Redlock => suite.engine(settings);
let rl: Redlock;

beforeAll(() => {
  rl = engine();
});

const keyspace = (): Promise<string[][]> => keyspaceOf(suite.probe);

/** No master holds a key it did not hold before. */
function expectNoNewKey(before: string[][], after: string[][]): void {
  expect(newKeys(before, after)).toEqual(before.map(() => []));
}

/** Runs `call`, expects a typed error on `field`, and that no master got a new key. */
async function expectRejected(
  call: () => unknown,
  type: typeof InvalidArgumentError | typeof InvalidConfigurationError,
  field: string,
): Promise<Error> {
  // Settled first: a round ends at a quorum, so an earlier call's write to the last master (a
  // lock the test holds) may still be on its way; it must not count as this call's new key.
  await Promise.all(suite.clients.map((c) => c.ping()));
  const before = await keyspace();
  let error: unknown;
  try {
    await call();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(type);
  expect((error as InvalidArgumentError).field).toBe(field);
  await Promise.all(suite.clients.map((c) => c.ping()));
  expectNoNewKey(before, await keyspace());
  return error as Error;
}

const noop = async (): Promise<string> => 'ran';

/* eslint-disable no-sparse-arrays */
describe('every resource argument is validated at the boundary (items 4, 13)', () => {
  const badResources: [string, unknown][] = [
    ['resources[0]', [, 'a']],
    ['resources[0]', new Array(2)],
    ['resources[1]', ['a', , 'b']],
    ['resources[0]', [undefined]],
    ['resources[0]', [new String('a')]],
    ['resources', null],
    ['resources', { 0: 'a', length: 1 }],
    ['resources', '\uD800'],
    ['resources', '\uDC00'],
    ['resources', 'order:\uD83D'],
    ['resources[1]', ['ok', 'x\uDFFFy']],
  ];

  it.each(badResources)('acquire: %s of %p', async (field, resources) => {
    await expectRejected(() => rl.acquire(resources as string), InvalidArgumentError, field);
  });

  it.each(badResources)('tryAcquire: %s of %p', async (field, resources) => {
    await expectRejected(() => rl.tryAcquire(resources as string), InvalidArgumentError, field);
  });

  it.each(badResources)('using: %s of %p (the routine never runs)', async (field, resources) => {
    let ran = false;
    await expectRejected(
      () => rl.using(resources as string, () => (ran = true)),
      InvalidArgumentError,
      field,
    );
    expect(ran).toBe(false);
  });

  it('a sparse array never locks "undefined", and a second contender gets the same typed error', async () => {
    for (let i = 0; i < 2; i++) {
      await expectRejected(
        () => rl.acquire([, 'a'] as string[]),
        InvalidArgumentError,
        'resources[0]',
      );
    }
    expect(await suite.probe[0].exists(rl.keyOf('undefined'))).toBe(0);
  });

  it('lone surrogates do not collide with U+FFFD: they are refused while U+FFFD is held', async () => {
    const held = await rl.acquire('\uFFFD');
    try {
      for (const lone of ['\uD800', '\uDC00']) {
        await expectRejected(() => rl.tryAcquire(lone), InvalidArgumentError, 'resources');
      }
      // A well-formed surrogate pair is an ordinary character.
      const emoji = await rl.tryAcquire(`\u{1F512}:${uniqueResource('pair')}`);
      expect(emoji).toBeInstanceOf(Lock);
      await emoji!.release();
      expect(await rl.tryAcquire('\uFFFD')).toBeNull();
    } finally {
      await held.release();
    }
  });
});

describe('every option is checked by name and type (items 7, 8, 14)', () => {
  it.each<[string, unknown]>([
    ['options', null],
    ['options', []],
    ['retryDely', { retryDely: 5 }],
    ['ttl', { ttl: 1 }],
    ['ttl', { ttl: 2 }],
    ['ttl', { ttl: 11 }],
    ['retryDelay', { retryDelay: 2 ** 31 }],
    ['retryJitter', { retryJitter: 2 ** 31 }],
    ['retryJitter', { retryDelay: MAX_TIMER_MS }],
    ['waitTimeout', { waitTimeout: 2 ** 31 }],
    ['signal', { signal: {} }],
  ])('acquire rejects %s: %p', async (field, options) => {
    const warnings: Error[] = [];
    const onWarning = (w: Error): number => warnings.push(w);
    process.on('warning', onWarning);
    try {
      await expectRejected(
        () => rl.acquire(uniqueResource('opt'), options as never),
        InvalidArgumentError,
        field,
      );
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.map((w) => w.name)).not.toContain('TimeoutOverflowWarning');
  });

  it('an unknown option name lists the valid ones', async () => {
    const error = await expectRejected(
      () => rl.acquire(uniqueResource('typo'), { retryDely: 5 } as never),
      InvalidArgumentError,
      'retryDely',
    );
    expect(error.message).toContain(
      'ttl, retryCount, retryDelay, retryJitter, waitTimeout, signal',
    );
    const using = await expectRejected(
      () => rl.using(uniqueResource('typo'), noop, { autoExtnd: false } as never),
      InvalidArgumentError,
      'autoExtnd',
    );
    expect(using.message).toContain('autoExtend, extendThreshold');
  });

  it.each<[string, Record<string, unknown>]>([
    ['retryCount', { retryCount: 3 }],
    ['waitTimeout', { waitTimeout: 100 }],
    ['ttl', { ttl: 2 }],
    ['retryDelay', { retryDelay: 2 ** 31 }],
  ])('tryAcquire rejects %s: %p', async (field, options) => {
    await expectRejected(
      () => rl.tryAcquire(uniqueResource('try'), options as never),
      InvalidArgumentError,
      field,
    );
  });

  it.each<[string, unknown, unknown]>([
    ['routine', null, {}],
    ['routine', 'run', {}],
    ['options', noop, null],
    ['extendTreshold', noop, { extendTreshold: 10 }],
    ['autoExtend', noop, { autoExtend: 'yes' }],
    ['extendThreshold', noop, { ttl: 300, extendThreshold: 300 }],
    ['extendThreshold', noop, { ttl: 300, extendThreshold: 151 }],
    ['extendThreshold', noop, { extendThreshold: 10_000 }],
    ['extendThreshold', noop, { extendThreshold: 0 }],
    ['ttl', noop, { ttl: 2 }],
  ])('using rejects %s', async (field, routine, options) => {
    await expectRejected(
      () => rl.using(uniqueResource('using'), routine as never, options as never),
      InvalidArgumentError,
      field,
    );
  });

  it('release, extend and keepAlive refuse forged locks; extend checks its ttl', async () => {
    const forged = Object.create(Lock.prototype) as Lock;
    for (const candidate of [forged, {}, null, 'lock']) {
      await expectRejected(() => rl.release(candidate as Lock), InvalidArgumentError, 'lock');
      await expectRejected(() => rl.extend(candidate as Lock), InvalidArgumentError, 'lock');
      await expectRejected(() => rl.keepAlive(candidate as Lock), InvalidArgumentError, 'lock');
    }
    const lock = await rl.acquire(uniqueResource('extend'));
    try {
      await expectRejected(
        () =>
          new Lock(rl, {
            resources: lock.resources,
            value: lock.value,
            attempts: 1,
            fencingTokens: [],
            state: {
              validUntil: Infinity,
              expiresAt: Infinity,
              ttl: 10_000,
              extensions: 0,
              released: false,
              votes: [],
              acquiredAt: 0,
            },
          }),
        InvalidArgumentError,
        'lock',
      );
      await expectRejected(() => rl.extend(lock, 2), InvalidArgumentError, 'ttl');
      await expectRejected(() => rl.extend(lock, 2 ** 31), InvalidArgumentError, 'ttl');
      await expectRejected(() => rl.keepAlive(lock, 0), InvalidArgumentError, 'extendThreshold');
      expect(lock.isValid).toBe(true);
    } finally {
      await lock.release();
    }
  });
});

describe('fencedWrite / fencedRead (item 13)', () => {
  it('refuse ill-formed keys, which would alias another key', async () => {
    await expectRejected(
      () => fencedWrite(suite.probe[0], '\uD800', 1, 'x'),
      InvalidArgumentError,
      'key',
    );
    await expectRejected(() => fencedRead(suite.probe[0], 'a\uDC00'), InvalidArgumentError, 'key');
    await expectRejected(
      () => fencedWrite(suite.probe[0], '', 1, 'x'),
      InvalidArgumentError,
      'key',
    );
  });
});

describe('settings with real masters (items 7, 8, 11)', () => {
  it.each<[string, RedlockSettings]>([
    ['keyPrefix', { keyPrefix: '' }],
    ['keyPrefix', { keyPrefix: 'lock' }],
    ['keyPrefix', { keyPrefix: '\uD800:' }],
    // its lock keys would be the fencing counters of the prefix 'lock:'
    ['keyPrefix', { keyPrefix: 'lock:fence:' }],
    // its lock keys would be the writer-waiting flags of the prefix 'app:'
    ['keyPrefix', { keyPrefix: 'app:wait:' }],
    ['retryDely', { retryDely: 5 } as RedlockSettings],
    ['retryDelay', { retryDelay: 2 ** 31 }],
    ['extendThreshold', { extendThreshold: 10_000 }],
    ['quarantine.enabled', { quarantine: { enabled: 'no' as unknown as boolean } }],
  ])('the engine refuses %s before touching a master', async (field, settings) => {
    // The restart quarantine (on here) writes its boot marker as soon as an engine exists.
    await expectRejected(
      () => engine({ ...settings, quarantine: settings.quarantine ?? true }),
      InvalidConfigurationError,
      field,
    );
  });

  it('with an application key named "boot", an empty prefix is refused and the key is untouched', async () => {
    const key = `boot`;
    await Promise.all(suite.probe.map((c) => c.set(key, 'application data')));
    try {
      await expectRejected(
        () => engine({ keyPrefix: '', quarantine: true }),
        InvalidConfigurationError,
        'keyPrefix',
      );
      expect(await Promise.all(suite.probe.map((c) => c.get(key)))).toEqual(
        Array(3).fill('application data'),
      );
    } finally {
      await Promise.all(suite.probe.map((c) => c.del(key)));
    }
  });

  it('an extendThreshold above half of a per-call ttl is capped: no back-to-back extensions', async () => {
    // The setting fits the default ttl (10 s); a 300 ms lock gets a threshold of 150 ms.
    const e = engine({ extendThreshold: 1000, maxExtensions: 40, requestTimeout: 100 });
    const events: RedlockEvent[] = [];
    const stop = e.observe((ev) => events.push(ev));
    const r = uniqueResource('threshold');
    try {
      const aborted = await e.using(
        r,
        async (signal) => {
          await sleep(700); // the routine's work, longer than two ttls
          return signal.aborted;
        },
        { ttl: 300 },
      );
      const extensions = events.filter((ev) => ev.type === 'extended').length;
      expect(aborted).toBe(false);
      expect(extensions).toBeGreaterThanOrEqual(1);
      // One extension per ≥ 150 ms at most (fewer on a slow machine); a hot loop makes dozens.
      expect(extensions).toBeLessThanOrEqual(12);
    } finally {
      stop();
    }
  });

  it('the largest accepted retry wait neither spins nor warns', async () => {
    const e = engine({ retryDelay: MAX_TIMER_MS - 100, retryJitter: 100, handoff: false });
    const r = uniqueResource('long-wait');
    const held = await e.acquire(r);
    const warnings: Error[] = [];
    const onWarning = (w: Error): number => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const error = await e
        .acquire(r, { retryCount: 1_000_000, waitTimeout: 300 })
        .catch((x: unknown) => x);
      expect(error).toBeInstanceOf(WaitTimeoutError);
      expect((error as WaitTimeoutError).cause).toBeInstanceOf(LockContendedError);
      // The first attempt, then one wait capped by the deadline: no spinning.
      expect((error as WaitTimeoutError).attempts).toBeLessThanOrEqual(3);
    } finally {
      process.off('warning', onWarning);
      await held.release();
    }
    expect(warnings.map((w) => w.name)).not.toContain('TimeoutOverflowWarning');
  });
});
