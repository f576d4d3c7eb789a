/**
 * `npm run sample`: the sample shop on http://127.0.0.1:3000, run as a native ES module app, as
 * `nest new` scaffolds them since Nest 12 (`"type": "module"` in sample/package.json; Nest and the
 * other packages are loaded as the ES modules they are). The TypeScript sources are compiled on
 * load by `node --import ./scripts/ts-esm/register.mjs` with the compiler options the test runner
 * uses (tsconfig.jest.json), so `npm run sample` runs the same modules the e2e tests boot.
 *
 * Environment:
 * - `REDLOCK_URLS`: comma-separated lock masters (`redis://host:port`, 3 or 5 independent
 *   masters). Unset: five private `redis-server` processes are started on free loopback ports
 *   (needs `redis-server` on the PATH) and stopped on exit.
 * - `SAMPLE_DATA_URL`: Redis for the shop's data. Default: the first lock master.
 * - `PORT` (default 3000), `RPC_PORT` (TCP microservice, default PORT + 1, or 3001 with PORT=0),
 *   `SAMPLE_PLATFORM` (`express` | `fastify`), `SAMPLE_JANITOR_CRON` (default every 10 s).
 * - `SAMPLE_OTEL=console` (demo): registers a minimal OpenTelemetry SDK printing spans to the
 *   console (see `otel-demo.ts`); the lock spans `redlock.acquire` / `redlock.release` appear as
 *   requests take locks. Unset: nothing of OpenTelemetry's SDK is loaded.
 *
 * `GET /health` (@nestjs/terminus) reports the lock masters; SIGINT / SIGTERM shut down
 * gracefully (`app.close()`: new locks refused, running locked calls finish, locks released).
 *
 * In an application, import from 'nestjs-redlock' instead of '../lib'.
 */
import { RedisMasters } from '../test/harness/redis-masters';
import type { RedlockModuleOptions } from '../lib';
import { createSampleApp } from './app.module';
import { StockService } from './orders/stock.service';

async function main(): Promise<void> {
  // Demo only, opt-in: the SDK must be registered before the app (and its lock module) exists.
  if (process.env.SAMPLE_OTEL === 'console') {
    const { registerConsoleTracing } = await import('./otel-demo');
    registerConsoleTracing();
  } else if (process.env.SAMPLE_OTEL) {
    console.warn(`SAMPLE_OTEL=${process.env.SAMPLE_OTEL} ignored (only 'console' is supported)`);
  }
  const given = process.env.REDLOCK_URLS?.split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  let masters: RedisMasters | undefined;
  if (!given?.length) {
    console.log('REDLOCK_URLS not set: starting 5 local redis-server masters...');
    masters = await RedisMasters.start(5);
  }
  const urls = given?.length ? given : masters!.urls;
  const redlock: RedlockModuleOptions = {
    clients: urls,
    // Masters we just started ourselves hold no lock older than themselves, so the restart
    // quarantine (which keeps a master that restarted less than maxTtl ago from voting, because
    // it may have lost locks it held) has nothing to protect here and would only block locking
    // for the first minute. Keep it on (the default) for masters you did not just create.
    ...(masters ? { quarantine: false } : {}),
  };
  const port = Number(process.env.PORT ?? 3000);
  const rpcPort = Number(process.env.RPC_PORT ?? (port > 0 ? port + 1 : 3001));
  const platform = process.env.SAMPLE_PLATFORM === 'fastify' ? 'fastify' : 'express';
  const sample = await createSampleApp({
    platform,
    redlock,
    store: process.env.SAMPLE_DATA_URL ?? urls[0],
    port,
    microservicePort: rpcPort,
    logger: ['log', 'error', 'warn'],
  });
  await sample.app.get(StockService).set('coffee', 100);

  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    console.log(`\n${signal}: shutting down...`);
    const timer = setTimeout(() => process.exit(1), 15_000);
    timer.unref();
    try {
      await sample.close();
      await masters?.stop();
    } finally {
      process.exit(0);
    }
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));

  const u = sample.url;
  // `require` exists only in CommonJS modules: this tells which module system runs the sample.
  const moduleSystem = typeof require === 'undefined' ? 'ES module' : 'CommonJS';
  console.log(`
Sample shop (${platform}, ${moduleSystem}) on ${u}  —  lock masters: ${masters ? '5 local redis-server' : urls.length}
RPC (TCP) on 127.0.0.1:${rpcPort}, WebSocket (socket.io) on ${u}

Try:
  # lock service health (@nestjs/terminus): 200 'up' with a quorum, 503 'down' / draining: true
  curl -s ${u}/health
  # reserve stock (StockService.take is @Locked('stock:{args.0}', { onLocked: 'wait' }))
  curl -s -XPOST ${u}/orders -H 'content-type: application/json' -d '{"sku":"coffee","qty":2}'
  # pay it twice at once: one 201, one 423 Locked with Retry-After (@Locked('order:{params.id}'))
  ID=<order id>; curl -si -XPOST ${u}/orders/$ID/pay & curl -si -XPOST ${u}/orders/$ID/pay; wait
  curl -s ${u}/orders/$ID/charges            # exactly one charge
  # nested lock on the same resource (reentrant)
  curl -s -XPOST ${u}/orders/<another id>/cancel
  # server-sent events while holding the order lock; Ctrl-C releases it
  curl -N ${u}/orders/<id>/fulfilment
  # a long report under RedlockService.using(): lasts 3 ttls, extended automatically
  curl -s -XPOST ${u}/reports/daily
  # the janitor (@Cron + @Locked onLocked: 'skip') — one run per tick across instances
  curl -s ${u}/jobs/janitor/runs
  curl -s ${u}/stock/coffee

Ctrl-C to stop.`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
