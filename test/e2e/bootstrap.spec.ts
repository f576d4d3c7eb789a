import { Test } from '@nestjs/testing';
import type { RedlockModuleOptions } from '../../lib';
import { RedisMasters } from '../harness/redis-masters';

/**
 * Invalid module options stop the sample app's bootstrap with an error that names the option
 * (and never shows a password); valid ones boot.
 */
describe('sample app bootstrap with invalid RedlockModule options', () => {
  let masters: RedisMasters;

  beforeAll(async () => {
    masters = await RedisMasters.start(3);
  });

  afterAll(async () => {
    await masters?.stop();
  });

  /** Compiles and inits the sample module with `redlock` options, then closes it. */
  async function boot(redlock: unknown): Promise<void> {
    const { SampleModule } = await import('../../sample/app.module');
    const moduleRef = await Test.createTestingModule({
      imports: [
        SampleModule.register({
          redlock: redlock as RedlockModuleOptions,
          store: 'memory',
          scheduler: false,
        }),
      ],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    try {
      await app.init();
    } finally {
      await app.close();
    }
  }

  it('boots with valid options (control)', async () => {
    await expect(boot({ clients: masters.urls, quarantine: false, ttl: 5000 })).resolves.toBe(
      undefined,
    );
  });

  it.each([
    ['clients', { clients: [] }],
    ['clients[1]', { clients: ['redis://127.0.0.1:1', 'http://127.0.0.1:2'] }],
    ['ttl', { clients: ['redis://127.0.0.1:1'], ttl: -5 }],
    ['requestTimeout', { clients: ['redis://127.0.0.1:1'], ttl: 100, requestTimeout: 200 }],
    ['contentionStatus', { clients: ['redis://127.0.0.1:1'], contentionStatus: 500 }],
    [
      'lockedDefaults.onLocked',
      { clients: ['redis://127.0.0.1:1'], lockedDefaults: { onLocked: 'never' } },
    ],
    ['tll', { clients: ['redis://127.0.0.1:1'], tll: 100 }],
  ])('names %s', async (field, options) => {
    const error = await boot(options).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toContain(`"${field}"`);
  });

  it.each(['express', 'fastify'] as const)(
    'createSampleApp (%s) rejects the same way',
    async (platform) => {
      const { createSampleApp } = await import('../../sample/app.module');
      await expect(
        createSampleApp({
          platform,
          redlock: { clients: masters.urls, ttl: 0 },
          store: 'memory',
          scheduler: false,
          logger: false,
        }),
      ).rejects.toThrow('"ttl"');
    },
  );

  it('never shows the password of a bad client URL', async () => {
    const error = (await boot({ clients: ['redis://:s3cret-pw@127.0.0.1:notaport'] }).catch(
      (err: unknown) => err,
    )) as Error;
    expect(error.message).toContain('"clients[0]"');
    expect(error.message).not.toContain('s3cret-pw');
  });
});
