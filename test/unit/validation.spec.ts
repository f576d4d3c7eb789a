/**
 * Argument and configuration validation: bad input gets a typed error naming the field, before any
 * Redis call. The clients are lazy (never connected), so any Redis call would hang or fail.
 */
import Redis from 'ioredis';
import {
  InvalidArgumentError,
  InvalidConfigurationError,
  MAX_RESOURCE_LENGTH,
  Redlock,
} from '../../lib';
import { normalizeResources } from '../../lib/core/base/validate';
import { keySlot } from '../../lib/core/base/keys';

function lazyClients(n: number): Redis[] {
  return Array.from({ length: n }, (_, i) => new Redis({ port: 1 + i, lazyConnect: true }));
}

const quiet = { logger: { warn: () => undefined } };

describe('configuration', () => {
  const clients = lazyClients(5);
  afterAll(() => clients.forEach((c) => c.disconnect()));

  it.each([
    ['ttl', { ttl: 0 }],
    ['ttl', { ttl: -1 }],
    ['ttl', { ttl: Number.NaN }],
    ['ttl', { ttl: Infinity }],
    ['ttl', { ttl: 1.5 }],
    ['maxTtl', { maxTtl: 2 ** 31 }],
    ['ttl', { ttl: 70_000 }],
    ['retryCount', { retryCount: -1 }],
    ['retryDelay', { retryDelay: -5 }],
    ['retryJitter', { retryJitter: Infinity }],
    ['driftFactor', { driftFactor: 1 }],
    ['driftFactor', { driftFactor: -0.1 }],
    ['quorum', { quorum: 6 }],
    ['quorum', { quorum: 0 }],
    ['requestTimeout', { requestTimeout: 10_000 }],
    ['requestTimeout', { requestTimeout: 0 }],
    ['keyPrefix', { keyPrefix: 'a{b' }],
    ['maxExtensions', { maxExtensions: -1 }],
    ['quarantine.duration', { quarantine: { duration: -1 } }],
  ])('rejects a bad %s', (field, settings) => {
    let error: unknown;
    try {
      new Redlock(clients, { ...quiet, ...settings });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidConfigurationError);
    expect((error as InvalidConfigurationError).field).toBe(field);
    expect((error as Error).message).toContain(field);
  });

  it('rejects no clients, non-clients and duplicates', () => {
    expect(() => new Redlock([])).toThrow(InvalidConfigurationError);
    expect(() => new Redlock([{} as Redis])).toThrow(/clients\[0\]/);
    expect(() => new Redlock([clients[0], clients[0]], quiet)).toThrow(/twice/);
  });

  it('warns about fewer than 3 masters, an even count and a non-majority quorum', () => {
    const messages: string[] = [];
    const logger = { warn: (m: string) => messages.push(m) };
    new Redlock(clients.slice(0, 2), { logger }).close();
    new Redlock(clients.slice(0, 4), { logger }).close();
    new Redlock(clients, { logger, quorum: 2 }).close();
    expect(messages.join('\n')).toMatch(/only 2 master/);
    expect(messages.join('\n')).toMatch(/even count/);
    expect(messages.join('\n')).toMatch(/not a majority/);
  });

  it('fills defaults: majority quorum, 10 s ttl, quarantine derived from maxTtl', () => {
    const rl = new Redlock(clients, quiet);
    expect(rl.quorum).toBe(3);
    expect(rl.settings.ttl).toBe(10_000);
    expect(rl.settings.quarantine).toEqual({
      enabled: true,
      duration: Math.ceil(60_000 * 1.01) + 2,
      trustAppendFsyncAlways: true,
    });
    void rl.close();
  });
});

describe('arguments', () => {
  const clients = lazyClients(3);
  const rl = new Redlock(clients, { ...quiet, quarantine: false });
  afterAll(async () => {
    await rl.close();
    clients.forEach((c) => c.disconnect());
  });

  it.each([
    ['resources', ''],
    ['resources', []],
    ['resources', 42],
    ['resources[1]', ['a', '']],
    ['resources[0]', [7]],
    ['resources', 'x'.repeat(MAX_RESOURCE_LENGTH + 1)],
  ])('acquire rejects bad %s before any Redis call', async (field, resources) => {
    const error = await rl.acquire(resources as string).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).field).toBe(field);
  });

  it.each([
    ['ttl', { ttl: 0 }],
    ['ttl', { ttl: 61_000 }],
    ['ttl', { ttl: 2.5 }],
    ['retryCount', { retryCount: -1 }],
    ['retryDelay', { retryDelay: Number.NaN }],
    ['waitTimeout', { waitTimeout: -1 }],
    ['signal', { signal: 'nope' }],
  ])('acquire rejects a bad %s option', async (field, options) => {
    const error = await rl.acquire('r', options as object).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).field).toBe(field);
  });

  it('using rejects a non-function routine; release and extend reject non-locks', async () => {
    await expect(rl.using('r', 'x' as never)).rejects.toThrow(/routine/);
    await expect(rl.release({} as never)).rejects.toThrow(InvalidArgumentError);
    await expect(rl.extend({} as never, 100)).rejects.toThrow(InvalidArgumentError);
  });

  it('de-duplicates and sorts resources', () => {
    expect(normalizeResources(['b', 'a', 'b'])).toEqual(['a', 'b']);
  });
});

describe('keySlot', () => {
  it('matches Redis Cluster slots, honouring hash tags', () => {
    // Values from CLUSTER KEYSLOT on Redis 7.
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    expect(keySlot('lock:{a}')).toBe(keySlot('a'));
    expect(keySlot('foo{}{bar}')).toBe(keySlot('foo{}{bar}'));
  });
});
