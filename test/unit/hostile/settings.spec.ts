/**
 * Hostile settings and options: every engine setting, Nest
 * module option and `@Locked()` option is checked by name and type when it is given, with a
 * typed error naming the field (and, for an unknown name, listing the valid ones). The clients
 * are lazy and never connect: a construction that slipped through would not reach Redis here
 * (test/core/hostile/ checks the masters' keyspace with real servers).
 */
import 'reflect-metadata';
import Redis from 'ioredis';
import { InvalidArgumentError, InvalidConfigurationError } from '../../../lib/core/base/errors';
import { Lock } from '../../../lib/core/lock/lock';
import { Redlock } from '../../../lib/core/redlock';
import type { RedlockSettings } from '../../../lib/core/base/settings';
import { SETTING_NAMES, resolveSettings } from '../../../lib/core/base/settings';
import { MAX_TIMER_MS } from '../../../lib/core/base/clock';
import { minTtl } from '../../../lib/core/base/validate';
import { Locked } from '../../../lib/decorators/locked.decorator';
import { normalizeOptions } from '../../../lib/options';
import type { RedlockModuleOptions } from '../../../lib/interfaces/redlock-module-options.interface';
import { InMemoryRedlock } from '../../../lib/testing/in-memory-redlock';

const quiet = { logger: { warn: () => undefined } };

function configErrorOf(fn: () => unknown): InvalidConfigurationError {
  let error: unknown;
  try {
    fn();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(InvalidConfigurationError);
  return error as InvalidConfigurationError;
}

describe('engine settings', () => {
  const clients = Array.from(
    { length: 3 },
    (_, i) => new Redis({ port: 1 + i, lazyConnect: true }),
  );
  afterAll(() => clients.forEach((c) => c.disconnect()));

  it.each<[string, unknown]>([
    // item 14: unknown names (typos) are errors, not silently ignored
    ['retryDely', { retryDely: 5 }],
    ['ttL', { ttL: 5000 }],
    ['quarantine.duraton', { quarantine: { duraton: 5 } }],
    // item 14: quarantine, trustAppendFsyncAlways and logger are type-checked
    ['quarantine.enabled', { quarantine: { enabled: 'no' } }],
    ['quarantine.trustAppendFsyncAlways', { quarantine: { trustAppendFsyncAlways: 1 } }],
    ['quarantine', { quarantine: [] }],
    ['quarantine', { quarantine: 'off' }],
    ['logger', { logger: 'console' }],
    ['logger', { logger: { warning: () => undefined } }],
    ['logger.debug', { logger: { warn: () => undefined, debug: 'yes' } }],
    // item 14: a ttl that drift alone eats can never be granted
    ['ttl', { ttl: 1, requestTimeout: 1 }],
    ['ttl', { ttl: 2, requestTimeout: 1 }],
    ['ttl', { ttl: 11, requestTimeout: 10 }],
    ['ttl', { ttl: 500, maxTtl: 500, driftFactor: 0.99, requestTimeout: 20 }],
    // item 8: durations beyond Node's timer limit
    ['retryDelay', { retryDelay: 2 ** 31 }],
    ['retryJitter', { retryJitter: 2 ** 31 }],
    ['retryDelay', { retryDelay: 1e300 }],
    ['retryJitter', { retryDelay: MAX_TIMER_MS, retryJitter: 1 }],
    ['retryJitter', { retryDelay: 2 ** 30, retryJitter: 2 ** 30 }],
    // item 7: an extension threshold at or near the ttl would extend back to back
    ['extendThreshold', { ttl: 1000, extendThreshold: 1000 }],
    ['extendThreshold', { ttl: 1000, extendThreshold: 5000 }],
    ['extendThreshold', { ttl: 1000, extendThreshold: 501 }],
    // item 11: the prefix must be a namespace of its own
    ['keyPrefix', { keyPrefix: '' }],
    ['keyPrefix', { keyPrefix: 'lock' }],
    ['keyPrefix', { keyPrefix: 'lock{x}:' }],
    ['keyPrefix', { keyPrefix: 42 }],
    // item 13: ill-formed prefixes
    ['keyPrefix', { keyPrefix: '\uD800:' }],
    ['keyPrefix', { keyPrefix: 'a\uDC00:' }],
    // type checks that already held (kept as a guard)
    ['fencing', { fencing: 'true' }],
    ['handoff', { handoff: 1 }],
    ['repairOnExtend', { repairOnExtend: 'yes' }],
    ['repairOnExtend', { repairOnExtend: null }],
    ['settings', []],
  ])('rejects %s', (field, settings) => {
    const rl = (s: unknown) => new Redlock(clients, { ...quiet, ...(s as RedlockSettings) });
    const error = configErrorOf(() =>
      Array.isArray(settings) ? new Redlock(clients, settings as RedlockSettings) : rl(settings),
    );
    expect(error.field).toBe(field);
  });

  it('lists the valid names when a setting is unknown', () => {
    const error = configErrorOf(() => resolveSettings({ retryDely: 5 } as RedlockSettings, 3));
    for (const name of SETTING_NAMES) expect(error.message).toContain(name);
    const q = configErrorOf(() =>
      resolveSettings({ quarantine: { duraton: 5 } } as RedlockSettings, 3),
    );
    expect(q.message).toContain('quarantine.duration');
    expect(q.message).toContain('quarantine.trustAppendFsyncAlways');
  });

  it('accepts the limits themselves and derives the smallest ttl from drift and requestTimeout', () => {
    expect(minTtl(50, 0.01)).toBe(12); // 12 − (0 + 2) = 10 = min(50, 10)
    expect(minTtl(1, 0)).toBe(3); // 3 − 2 = 1 = min(1, 10)
    expect(minTtl(50, 0.5)).toBe(23); // 23 − (11 + 2) = 10
    for (const [rt, df] of [
      [1, 0],
      [50, 0.01],
      [7, 0.3],
      [500, 0.9],
    ]) {
      const min = minTtl(rt, df);
      expect(min - (Math.floor(min * df) + 2)).toBeGreaterThanOrEqual(Math.min(rt, 10));
      expect(min - 1 - (Math.floor((min - 1) * df) + 2)).toBeLessThan(Math.min(rt, 10));
    }
    const edge = resolveSettings(
      {
        ...quiet,
        ttl: 12,
        requestTimeout: 11,
        retryDelay: MAX_TIMER_MS - 100,
        retryJitter: 100,
        extendThreshold: 6,
        keyPrefix: '\u{1F512}:', // a surrogate pair is well-formed
        quarantine: { enabled: false, trustAppendFsyncAlways: false },
      },
      3,
    );
    expect(edge).toMatchObject({ ttl: 12, extendThreshold: 6, keyPrefix: '\u{1F512}:' });
    expect(edge.quarantine).toMatchObject({ enabled: false, trustAppendFsyncAlways: false });
    for (const keyPrefix of ['lock:', 'app/locks/', 'a.b.', 'x-', 'y_', 'z|', 'w#']) {
      expect(resolveSettings({ keyPrefix }, 3).keyPrefix).toBe(keyPrefix);
    }
  });

  it('the in-memory engine applies the same rules', () => {
    expect(configErrorOf(() => new InMemoryRedlock({ retryDely: 5 } as never)).field).toBe(
      'retryDely',
    );
    expect(configErrorOf(() => new InMemoryRedlock({ keyPrefix: '' })).field).toBe('keyPrefix');
  });
});

describe('forged locks', () => {
  it('cannot be constructed, and a prototype-made one is refused with a typed error', async () => {
    const rl = new InMemoryRedlock();
    let error: unknown;
    try {
      new Lock(rl, {
        resources: ['forged'],
        value: 'guessed-token',
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
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidArgumentError);
    const fake = Object.create(Lock.prototype) as Lock;
    for (const call of [() => rl.release(fake), () => rl.extend(fake)]) {
      const e = await call().catch((x: unknown) => x);
      expect(e).toBeInstanceOf(InvalidArgumentError);
      expect((e as InvalidArgumentError).field).toBe('lock');
    }
    expect(() => rl.keepAlive(fake)).toThrow(InvalidArgumentError);
    expect(() => fake.remainingValidity).toThrow(InvalidArgumentError);
    await rl.close();
  });
});

describe('module options', () => {
  const base = { clients: ['redis://127.0.0.1:1'] };

  it.each<[string, Record<string, unknown>]>([
    ['retryDely', { retryDely: 5 }],
    ['logger', { logger: console }], // the module logs through Nest's Logger
    ['keyPrefix', { keyPrefix: '' }],
    ['retryDelay', { retryDelay: 2 ** 31 }],
    ['extendThreshold', { extendThreshold: 5001 }],
    ['ttl', { ttl: 2 }],
    ['quarantine.enabled', { quarantine: { enabled: 'no' } }],
    ['quarantine.trustAppendFsyncAlways', { quarantine: { trustAppendFsyncAlways: 'yes' } }],
    ['lockedDefaults.ttl', { lockedDefaults: { ttl: 2 } }],
    ['lockedDefaults.retryDely', { lockedDefaults: { retryDely: 5 } }],
    [
      'lockedDefaults.retryJitter',
      { lockedDefaults: { retryDelay: 2 ** 30, retryJitter: 2 ** 30 } },
    ],
    ['lockedDefaults.waitTimeout', { lockedDefaults: { waitTimeout: 2 ** 31 } }],
  ])('rejects %s, naming it', (field, bad) => {
    const error = configErrorOf(() =>
      normalizeOptions({ ...base, ...bad } as unknown as RedlockModuleOptions),
    );
    expect(error.field).toBe(field);
  });

  it('lists the valid names of an unknown module or @Locked() option', () => {
    const error = configErrorOf(() =>
      normalizeOptions({ ...base, retryDely: 5 } as unknown as RedlockModuleOptions),
    );
    for (const name of ['clients', 'retryDelay', 'lockedDefaults', 'shutdownTimeout']) {
      expect(error.message).toContain(name);
    }
    const locked = configErrorOf(() =>
      normalizeOptions({ ...base, lockedDefaults: { waitTimout: 5 } } as never),
    );
    for (const name of ['waitTimeout', 'onLocked', 'autoExtend']) {
      expect(locked.message).toContain(name);
    }
    const telemetry = configErrorOf(() =>
      normalizeOptions({ ...base, telemetry: { trace: true } } as never),
    );
    expect(telemetry.field).toBe('telemetry.trace');
    expect(telemetry.message).toContain('traces, metrics');
  });

  it('normalizes valid options into settings the engine accepts again', () => {
    const resolved = normalizeOptions({
      ...base,
      quarantine: { duration: 5000, trustAppendFsyncAlways: false },
      extendThreshold: 5000,
      lockedDefaults: { ttl: 12, retryDelay: 10, retryJitter: 5 },
    });
    expect(resolved.quarantine).toEqual({
      enabled: true,
      duration: 5000,
      trustAppendFsyncAlways: false,
    });
    expect(resolved.lockedDefaults.ttl).toBe(12);
  });

  it('accepts repairOnExtend: on by default, off when asked, a boolean only', () => {
    expect(normalizeOptions(base).repairOnExtend).toBe(true);
    expect(normalizeOptions({ ...base, repairOnExtend: false }).repairOnExtend).toBe(false);
    const error = configErrorOf(() =>
      normalizeOptions({ ...base, repairOnExtend: 'no' } as unknown as RedlockModuleOptions),
    );
    expect(error.field).toBe('repairOnExtend');
  });
});

describe('@Locked() options and resources at decoration time', () => {
  const decorate = (resources: unknown, options?: unknown): InvalidConfigurationError =>
    configErrorOf(() => {
      class Target {
        run(): void {}
      }
      const descriptor = Object.getOwnPropertyDescriptor(Target.prototype, 'run')!;
      Locked(resources as string, options as never)(Target.prototype, 'run', descriptor);
    });

  it('rejects unknown and mistyped options, listing the valid names', () => {
    const unknown = decorate('r', { tll: 5 });
    expect(unknown.field).toBe('Target.run.tll');
    expect(unknown.message).toContain('ttl, retryCount');
    expect(decorate('r', { retryDelay: 2 ** 31 }).field).toBe('Target.run.retryDelay');
    expect(decorate('r', { autoExtend: 'yes' }).field).toBe('Target.run.autoExtend');
    expect(decorate('r', null).field).toBe('Target.run');
  });

  it('rejects sparse lists and ill-formed templates', () => {
    // eslint-disable-next-line no-sparse-arrays
    expect(decorate([, 'a']).field).toBe('Target.run');
    expect(decorate(new Array(2)).field).toBe('Target.run');
    expect(decorate('order:\uD800').message).toMatch(/well-formed/);
    expect(decorate(['ok', 'x:{args.0}\uDFFF']).message).toMatch(/well-formed/);
  });
});
