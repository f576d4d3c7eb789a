/**
 * Child process of the HTTP scenario: a tiny Nest Express app with one plain endpoint and one
 * `@Locked` endpoint (a distinct resource per request, so nothing contends), on 127.0.0.1 and a
 * free port. Masters come from `BENCH_REDIS_URLS`; the port is sent to the parent over IPC once
 * none of the masters is in restart quarantine for the server's key prefix (config.ts
 * `HTTP_KEY_PREFIX`: until then every `@Locked` request would be answered 503). Stops on the
 * parent's `'stop'` message or when the parent goes away.
 */
import 'reflect-metadata';
import { Controller, Get, Module, Param } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Locked, RedlockModule, RedlockService } from '../lib';
import {
  BENCH_SETTINGS,
  HTTP_KEY_PREFIX,
  SLOW_RETRY,
  maxTtlFor,
  quickFromEnv,
  untilTrusted,
} from './config';

@Controller()
class BenchController {
  @Get('plain/:id')
  plain(@Param('id') id: string): { id: string } {
    return { id };
  }

  @Get('locked/:id')
  @Locked('bench:http:{params.id}')
  locked(@Param('id') id: string): { id: string } {
    return { id };
  }
}

async function main(): Promise<void> {
  const urls = (process.env.BENCH_REDIS_URLS ?? '').split(',').filter(Boolean);
  if (urls.length === 0) throw new Error('BENCH_REDIS_URLS is not set');

  @Module({
    imports: [
      RedlockModule.forRoot({
        clients: urls,
        ttl: BENCH_SETTINGS.ttl,
        retryCount: BENCH_SETTINGS.retryCount,
        retryDelay: SLOW_RETRY.retryDelay,
        retryJitter: SLOW_RETRY.retryJitter,
        driftFactor: BENCH_SETTINGS.driftFactor,
        keyPrefix: HTTP_KEY_PREFIX,
        // Full safety defaults (fencing, restart quarantine); the load starts once the masters
        // are out of quarantine (below). BENCH_QUICK: maxTtl = ttl (config.ts).
        ...(maxTtlFor(quickFromEnv()) === undefined ? {} : { maxTtl: maxTtlFor(quickFromEnv()) }),
      }),
    ],
    controllers: [BenchController],
  })
  class BenchAppModule {}

  const app = await NestFactory.create(BenchAppModule, { logger: ['error'] });
  app.enableShutdownHooks();
  await app.listen(0, '127.0.0.1');
  await untilTrusted(app.get(RedlockService).engine, 180_000);
  const address = app.getHttpServer().address() as { port: number };
  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    setTimeout(() => process.exit(1), 10_000).unref();
    await app.close();
    process.exit(0);
  };
  process.on('message', (m) => {
    if (m === 'stop') void stop();
  });
  process.on('disconnect', () => void stop());
  process.send?.({ port: address.port });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
