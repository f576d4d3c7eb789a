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
import { RedisMasters } from '../harness/redis-masters';

let masters: RedisMasters;

beforeAll(async () => {
  masters = await RedisMasters.start(3);
});

afterAll(async () => {
  await masters?.stop();
});

/** Boots a module with `options`; resolves to the error of its startup, or closes it. */
async function startupError(options: RedlockModuleOptions, async = false): Promise<unknown> {
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
    const [a, b] = masters.urls;
    const err = await startupError(
      { clients: [a, b, `redis://127.0.0.1:${masters.masters[0].port}/2`], quarantine: false },
      async,
    );
    expect(err).toBeInstanceOf(InvalidConfigurationError);
    expect((err as Error).message).toMatch(/clients\[2\].*clients\[0\]/);
  });

  it('same server under two names (run_id): refused at init, naming the positions', async () => {
    const [a, b, c] = masters.masters;
    const err = await startupError({
      clients: [
        `redis://127.0.0.1:${a.port}`,
        `redis://127.0.0.1:${b.port}`,
        `redis://localhost:${a.port}`,
        `redis://127.0.0.1:${c.port}`,
      ],
      quarantine: false,
      requestTimeout: 500,
    });
    expect(err).toBeInstanceOf(InvalidConfigurationError);
    expect((err as Error).message).toMatch(/clients\[0\].*clients\[2\].*one server/);
  });

  it('distinct masters still start', async () => {
    await expect(startupError({ clients: masters.urls, quarantine: false })).resolves.toBe(
      undefined,
    );
  });
});

describe('node-redis clients', () => {
  it('boot next to URLs and lock; the same master under both libraries is found', async () => {
    const nodeRedis = createClient({ url: masters.urls[0] });
    nodeRedis.on('error', () => undefined);
    await nodeRedis.connect();
    try {
      await expect(
        startupError({ clients: [nodeRedis, masters.urls[1], masters.urls[2]], quarantine: false }),
      ).resolves.toBe(undefined);
      const err = await startupError({
        clients: [nodeRedis, masters.urls[1], masters.urls[0]],
        quarantine: false,
      });
      expect(err).toBeInstanceOf(InvalidConfigurationError);
      expect((err as Error).message).toMatch(/clients\[2\].*like clients\[0\]/);
    } finally {
      await nodeRedis.close();
    }
  });

  it('a client pool is refused with what was passed and what is accepted', async () => {
    const pool = createClientPool({ url: masters.urls[0] }); // never connected
    const err = await startupError({
      clients: [masters.urls[1], pool as unknown as string, masters.urls[2]],
      quarantine: false,
    });
    expect(err).toBeInstanceOf(InvalidConfigurationError);
    const message = (err as Error).message;
    expect(message).toContain('clients[1]');
    expect(message).toMatch(/node-redis client pool/);
    expect(message).toMatch(/createClient\(\)/);
    expect(message).toMatch(/URL/);
  });

  it('a legacy-mode client is refused, naming the fix', async () => {
    const legacy = createClient({ url: masters.urls[0] }).legacy(); // never connected
    const err = await startupError({
      clients: [masters.urls[1], legacy as unknown as string, masters.urls[2]],
      quarantine: false,
    });
    expect(err).toBeInstanceOf(InvalidConfigurationError);
    expect((err as Error).message).toMatch(/clients\[1\].*legacy-mode.*not client\.legacy\(\)/);
  });
});
