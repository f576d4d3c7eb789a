/**
 * Mistakes in the `clients` option refused at startup, against real masters: one master listed
 * twice (same address, or the same server under two names: same run_id), node-redis clients next
 * to URLs, and the node-redis shapes the engine cannot use (a pool, a legacy-mode client).
 */
import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import type { TestingModule } from '@nestjs/testing';
import { createClient, createClientPool } from 'redis';
import { InvalidConfigurationError, RedlockModule } from '../../lib';
import type { RedlockModuleOptions } from '../../lib';
import { SUITE_DEFAULTS, useMasters } from '../harness/engines';

const suite = useMasters(3);

/**
 * Boots a module with `options` over the suites' settings ({@link SUITE_DEFAULTS}); resolves to
 * the error of its startup, or closes it.
 */
async function startupError(given: RedlockModuleOptions, async = false): Promise<unknown> {
  const options: RedlockModuleOptions = { ...SUITE_DEFAULTS, ...given };
  let moduleRef: TestingModule | undefined;
  try {
    moduleRef = await Test.createTestingModule({
      imports: [
        async
          ? RedlockModule.forRootAsync({ useFactory: () => options })
          : RedlockModule.forRoot(options),
      ],
    }).compile();
    moduleRef.useLogger(false);
    await moduleRef.init();
  } catch (err) {
    return err;
  }
  await moduleRef.close();
  return undefined;
}

describe('the same master listed twice', () => {
  it.each([false, true])('same address: refused (forRootAsync: %s)', async (async) => {
    const [a, b] = suite.masters.urls;
    const err = await startupError(
      { clients: [a, b, `redis://127.0.0.1:${suite.masters.masters[0].port}/2`] },
      async,
    );
    expect(err).toBeInstanceOf(InvalidConfigurationError);
    expect((err as Error).message).toMatch(/clients\[2\].*clients\[0\]/);
  });

  it('same server under two names (run_id): refused at init, naming the positions', async () => {
    const [a, b, c] = suite.masters.masters;
    const err = await startupError({
      clients: [
        `redis://127.0.0.1:${a.port}`,
        `redis://127.0.0.1:${b.port}`,
        `redis://localhost:${a.port}`,
        `redis://127.0.0.1:${c.port}`,
      ],
      requestTimeout: 500,
    });
    expect(err).toBeInstanceOf(InvalidConfigurationError);
    expect((err as Error).message).toMatch(/clients\[0\].*clients\[2\].*one server/);
  });

  it('distinct masters still start', async () => {
    await expect(startupError({ clients: suite.masters.urls })).resolves.toBe(undefined);
  });
});

describe('node-redis clients', () => {
  it('boot next to URLs and lock; the same master under both libraries is found', async () => {
    const nodeRedis = createClient({ url: suite.masters.urls[0] });
    nodeRedis.on('error', () => undefined);
    await nodeRedis.connect();
    try {
      await expect(
        startupError({ clients: [nodeRedis, suite.masters.urls[1], suite.masters.urls[2]] }),
      ).resolves.toBe(undefined);
      const err = await startupError({
        clients: [nodeRedis, suite.masters.urls[1], suite.masters.urls[0]],
      });
      expect(err).toBeInstanceOf(InvalidConfigurationError);
      expect((err as Error).message).toMatch(/clients\[2\].*like clients\[0\]/);
    } finally {
      await nodeRedis.close();
    }
  });

  it('a client pool is refused with what was passed and what is accepted', async () => {
    const pool = createClientPool({ url: suite.masters.urls[0] }); // never connected
    const err = await startupError({
      clients: [suite.masters.urls[1], pool as unknown as string, suite.masters.urls[2]],
    });
    expect(err).toBeInstanceOf(InvalidConfigurationError);
    const message = (err as Error).message;
    expect(message).toContain('clients[1]');
    expect(message).toMatch(/node-redis client pool/);
    expect(message).toMatch(/createClient\(\)/);
    expect(message).toMatch(/URL/);
  });

  it('a legacy-mode client is refused, naming the fix', async () => {
    const legacy = createClient({ url: suite.masters.urls[0] }).legacy(); // never connected
    const err = await startupError({
      clients: [suite.masters.urls[1], legacy as unknown as string, suite.masters.urls[2]],
    });
    expect(err).toBeInstanceOf(InvalidConfigurationError);
    expect((err as Error).message).toMatch(/clients\[1\].*legacy-mode.*not client\.legacy\(\)/);
  });
});
