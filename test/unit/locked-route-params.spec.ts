import 'reflect-metadata';
import { Controller, Module, Param, Post } from '@nestjs/common';
import type { INestApplication, LoggerService } from '@nestjs/common';
import { RouterModule } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { Locked } from '../../lib';
import { RedlockTestingModule } from '../../lib/testing';

/**
 * A `@Locked()` template naming a route parameter the route does not have: a warning at startup
 * naming the method, and at request time a 400 without internal names, logged once on the server.
 */
class RecordingLogger implements LoggerService {
  readonly lines: string[] = [];
  log(m: unknown): void {
    this.lines.push(String(m));
  }
  error(m: unknown): void {
    this.lines.push(String(m));
  }
  warn(m: unknown): void {
    this.lines.push(String(m));
  }
  debug(m: unknown): void {
    this.lines.push(String(m));
  }
  verbose(m: unknown): void {
    this.lines.push(String(m));
  }
}

@Controller('payments')
class PaymentsController {
  @Post(':id/pay')
  @Locked('payment:{params.orderId}')
  pay(@Param('id') id: string): { paid: string } {
    return { paid: id };
  }

  @Post(':id/refund')
  @Locked('payment:{params.tenant}:{params.shop}:{params.id}')
  refund(@Param('id') id: string): { refunded: string } {
    return { refunded: id };
  }
}

@Module({ controllers: [PaymentsController] })
class PaymentsModule {}

describe('@Locked() templates naming a route parameter the route lacks', () => {
  let app: INestApplication;
  const logger = new RecordingLogger();

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedlockTestingModule.forRoot(),
        PaymentsModule,
        RouterModule.register([{ path: 'shops/:shop', module: PaymentsModule }]),
      ],
    }).compile();
    app = moduleRef.createNestApplication();
    app.useLogger(logger);
    app.setGlobalPrefix(':tenant');
    await app.init();
  });

  afterAll(async () => app?.close());

  it('warns at startup, naming the method and the parameters the route has', () => {
    const warnings = logger.lines.filter((l) => l.includes('{params.'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('PaymentsController.pay');
    expect(warnings[0]).toContain('{params.orderId}');
    expect(warnings[0]).toMatch(/id, shop, tenant/);
  });

  it('answers 400 without internal names and logs the mistake once', async () => {
    const server = app.getHttpServer();
    const before = logger.lines.length;
    for (let i = 0; i < 3; i++) {
      const res = await request(server).post('/t1/shops/s1/payments/7/pay').expect(400);
      const body = JSON.stringify(res.body);
      expect(body).not.toMatch(/PaymentsController|orderId|payment:/);
    }
    const logged = logger.lines.slice(before).filter((l) => l.includes('{params.orderId}'));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toContain('PaymentsController.pay');
    expect(logged[0]).toMatch(/no parameter orderId/);
  });

  it('parameters of the global prefix and the RouterModule path resolve', async () => {
    await request(app.getHttpServer()).post('/t1/shops/s1/payments/7/refund').expect(201);
  });
});
