/**
 * Answers that must tell the truth, against real masters: the 503 of a `@Locked()` route during
 * the restart quarantine says (Retry-After) when trying again can succeed, and health reports a
 * down master's own connection error (refused, wrong password, no password), redacted, not the
 * error of a command the client could not send.
 */
import 'reflect-metadata';
import { Controller, Param, Post } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import type { TestingModule } from '@nestjs/testing';
import request from 'supertest';
import { Locked, RedlockModule } from '../../lib';
import { RedlockHealthIndicator } from '../../lib/health';
import { RedisMasters, freePort } from '../harness/redis-masters';
import { waitUntil } from '../harness/util';

@Controller('orders')
class OrdersController {
  @Post(':id/pay')
  @Locked('truthful:order:{params.id}')
  pay(@Param('id') id: string): { paid: string } {
    return { paid: id };
  }
}

describe('Retry-After during the restart quarantine', () => {
  let masters: RedisMasters;
  let app: INestApplication;
  const QUARANTINE = 30_000;

  beforeAll(async () => {
    masters = await RedisMasters.start(3);
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedlockModule.forRoot({
          clients: masters.urls,
          quarantine: { duration: QUARANTINE },
          requestTimeout: 500,
          isGlobal: true,
        }),
      ],
      controllers: [OrdersController],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });

  afterAll(async () => {
    await app?.close();
    await masters?.stop();
  });

  it('is the remaining quarantine in seconds, not 1', async () => {
    const started = Date.now();
    const res = await request(app.getHttpServer()).post('/orders/1/pay').expect(503);
    const elapsed = Date.now() - started;
    const retryAfter = Number(res.headers['retry-after']);
    // Fresh masters: every one is quarantined for (about) the whole duration from their start.
    expect(retryAfter).toBeLessThanOrEqual(QUARANTINE / 1000);
    expect(retryAfter).toBeGreaterThanOrEqual(Math.floor((QUARANTINE - 10_000 - elapsed) / 1000));
  });
});

describe('health reports the connection error a down master gave', () => {
  const SECRET = 'truthful-s3cret';
  let masters: RedisMasters;
  let moduleRef: TestingModule;
  let refusedPort: number;

  beforeAll(async () => {
    masters = await RedisMasters.start(3, { extraArgs: ['--requirepass', SECRET] });
    refusedPort = await freePort(); // nothing listens there
    const [a, b, c] = masters.masters;
    moduleRef = await Test.createTestingModule({
      imports: [
        TerminusModule,
        RedlockModule.forRoot({
          clients: [
            `redis://:${SECRET}@127.0.0.1:${a.port}`,
            `redis://:wrong-${SECRET}@127.0.0.1:${b.port}`,
            `redis://127.0.0.1:${c.port}`,
            `redis://:${SECRET}@127.0.0.1:${refusedPort}`,
          ],
          quarantine: false,
          requestTimeout: 500,
        }),
      ],
      providers: [RedlockHealthIndicator],
    }).compile();
    moduleRef.useLogger(false);
    await moduleRef.init();
  });

  afterAll(async () => {
    await moduleRef?.close();
    await masters?.stop();
  });

  it('WRONGPASS, NOAUTH and ECONNREFUSED, without the password', async () => {
    const indicator = moduleRef.get(RedlockHealthIndicator);
    let errors: (string | undefined)[] = [];
    const expected = [undefined, /WRONGPASS/, /NOAUTH/, /ECONNREFUSED/];
    await waitUntil(async () => {
      const result = await indicator.isHealthy('locks');
      const details = result.locks as unknown as { masters: { error?: string }[] };
      errors = details.masters.map((m) => m.error);
      return errors.every((e, i) => {
        const want = expected[i];
        return want === undefined ? e === undefined : want.test(e ?? '');
      });
    }, 5000).catch(() => undefined);
    expect(errors[0]).toBeUndefined();
    expect(errors[1]).toMatch(/WRONGPASS/);
    expect(errors[2]).toMatch(/NOAUTH/);
    expect(errors[3]).toMatch(/ECONNREFUSED/);
    for (const e of errors) {
      expect(e ?? '').not.toMatch(/Stream isn't writeable/);
      expect(e ?? '').not.toContain(SECRET);
    }
  });
});
