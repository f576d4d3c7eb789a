import type { AddressInfo } from 'node:net';
import { DynamicModule, INestApplication, LogLevel, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MicroserviceOptions, Transport } from '@nestjs/microservices';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { IoAdapter } from '@nestjs/platform-socket.io';
import { ScheduleModule } from '@nestjs/schedule';
import { TerminusModule } from '@nestjs/terminus';
import { RedlockModule } from '../lib';
import { RedlockHealthIndicator } from '../lib/health';
import { HealthController } from './health/health.controller';
import { JobsController } from './jobs/jobs.controller';
import { ReservationsJanitor } from './jobs/reservations.janitor';
import { OrdersController } from './orders/orders.controller';
import { OrdersGateway } from './orders/orders.gateway';
import { OrdersService } from './orders/orders.service';
import { PaymentGateway } from './orders/payment.gateway';
import { ShippingController } from './orders/shipping.controller';
import { StockService } from './orders/stock.service';
import { ReportsController } from './reports/reports.controller';
import { ReportsService } from './reports/reports.service';
import { SAMPLE_OPTIONS, SampleOptions, resolveSampleOptions } from './sample.options';
import { MemorySampleStore, RedisSampleStore, SampleStore } from './store/sample-store';

/**
 * The sample shop: orders with stock reservation, payments, a janitor job, long reports,
 * fulfilment streams (SSE), a microservice and a WebSocket gateway — each protected by a lock —
 * and a health endpoint (`GET /health`) reporting the lock service.
 */
@Module({})
export class SampleModule {
  /** The shop with its lock module (`RedlockModule.forRoot(options.redlock)` unless given). */
  static register(options: SampleOptions): DynamicModule {
    const lockModule =
      options.redlockModule ??
      RedlockModule.forRoot(
        options.redlock ?? { clients: [] }, // no masters: RedlockModule reports it at bootstrap
      );
    return {
      module: SampleModule,
      imports: [
        lockModule,
        TerminusModule,
        ...(options.scheduler === false ? [] : [ScheduleModule.forRoot()]),
      ],
      controllers: [
        OrdersController,
        ReportsController,
        JobsController,
        ShippingController,
        HealthController,
      ],
      providers: [
        { provide: SAMPLE_OPTIONS, useValue: resolveSampleOptions(options) },
        {
          provide: SampleStore,
          useFactory: (): SampleStore =>
            options.store === 'memory'
              ? new MemorySampleStore()
              : new RedisSampleStore(options.store),
        },
        StockService,
        PaymentGateway,
        OrdersService,
        ReportsService,
        ReservationsJanitor,
        OrdersGateway,
        RedlockHealthIndicator,
      ],
    };
  }
}

/** Options of {@link createSampleApp}. */
export interface SampleAppOptions extends SampleOptions {
  /** HTTP platform. Default `'express'`. */
  platform?: 'express' | 'fastify';
  /** HTTP (and WebSocket) port on 127.0.0.1; `0` picks a free one. Default 0. */
  port?: number;
  /** Host to listen on. Default `'127.0.0.1'`. */
  host?: string;
  /** TCP microservice port on the same host, or `false` for none. Default `false`. */
  microservicePort?: number | false;
  /** Nest logger levels, or `false` for silence. Default `['error', 'warn']`. */
  logger?: LogLevel[] | false;
}

/** A running sample app. */
export interface SampleApp {
  readonly app: INestApplication;
  /** `http://127.0.0.1:<port>` (also the socket.io endpoint). */
  readonly url: string;
  readonly port: number;
  /** Closes the app (HTTP, microservice, gateway, lock module, store). */
  close(): Promise<void>;
}

/**
 * Creates and starts the sample app on Express or Fastify: HTTP + socket.io on `port`, the TCP
 * microservice on `microservicePort`. Used by `sample/main.ts` and by the e2e tests.
 */
export async function createSampleApp(options: SampleAppOptions): Promise<SampleApp> {
  const module = SampleModule.register(options);
  const logger = options.logger ?? (['error', 'warn'] as LogLevel[]);
  const app: INestApplication =
    options.platform === 'fastify'
      ? await NestFactory.create<NestFastifyApplication>(module, new FastifyAdapter(), {
          logger,
          abortOnError: false,
        })
      : await NestFactory.create(module, { logger, abortOnError: false });
  try {
    app.useWebSocketAdapter(new IoAdapter(app));
    if (options.microservicePort !== undefined && options.microservicePort !== false) {
      app.connectMicroservice<MicroserviceOptions>(
        {
          transport: Transport.TCP,
          options: { host: options.host ?? '127.0.0.1', port: options.microservicePort },
        },
        { inheritAppConfig: true },
      );
      await app.startAllMicroservices();
    }
    await app.listen(options.port ?? 0, options.host ?? '127.0.0.1');
  } catch (err) {
    await app.close().catch(() => undefined);
    throw err;
  }
  const { port } = app.getHttpServer().address() as AddressInfo;
  return {
    app,
    port,
    url: `http://${options.host ?? '127.0.0.1'}:${port}`,
    close: () => app.close(),
  };
}
