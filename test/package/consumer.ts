/**
 * The consumer app of the packaging test (test/package/pack.spec.ts): a typical Nest app that
 * installs the packed tarball and uses the three entry points — `nestjs-redlock`,
 * `nestjs-redlock/testing` and `nestjs-redlock/health` — as a user would. It is written to a
 * temporary directory and compiled there with the consumer's own TypeScript, so it is kept as
 * text here (it imports `nestjs-redlock` by its package name).
 */

/** A typical Nest tsconfig (CommonJS), strict, and checking every declaration file. */
export const consumerTsconfig = {
  compilerOptions: {
    module: 'commonjs',
    target: 'ES2021',
    strict: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    outDir: 'dist',
    skipLibCheck: false,
    esModuleInterop: true,
    types: ['node'],
  },
  include: ['src'],
};

/**
 * The tsconfig of an ES module app (`"type": "module"`, as `nest new` scaffolds from Nest 12 on):
 * `nodenext`, so that our types resolve through the `import` condition of the exports map as an
 * ESM consumer sees them.
 */
export const consumerEsmTsconfig = {
  compilerOptions: {
    ...consumerTsconfig.compilerOptions,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'ES2022',
  },
  include: ['src'],
};

/** What `dist/main.js` prints (last line of stdout) when every check passed. */
export const consumerExpected = {
  providerToken: 'number',
  lockToken: 'number',
  contended: true,
  http: [
    [200, false],
    [423, true],
  ],
  // A @Locked provider method whose resource is held, called by a route: the module's filter.
  providerHttp: [423, true],
  health: { status: 'ok', locks: 'up', usable: 3 },
  rpc: { isRpcException: true, code: 'LOCK_CONTENDED' },
  ws: { isWsException: true, code: 'LOCK_CONTENDED' },
  testing: { whileHeld: true, afterFree: 'resolved' },
  // @opentelemetry/api is not installed: the default (auto) loads nothing and works; asking for
  // telemetry explicitly fails at startup with a typed error.
  telemetry: { apiInstalled: false, explicit: 'InvalidConfigurationError' },
};

/** Both apps' HTTP helper (source text). */
const HTTP_GET = `/** GET; resolves with the status and whether a Retry-After of whole seconds (≥ 1) came. */
function get(port: number, path: string): Promise<[number, boolean]> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path }, (res) => {
      res.resume();
      res.on('end', () => {
        const retryAfter = res.headers['retry-after'];
        resolve([res.statusCode ?? 0, /^[1-9][0-9]*$/.test(String(retryAfter))]);
      });
    });
    req.on('error', reject);
    req.end();
  });
}
`;

/** Both apps' health check through `nestjs-redlock/health` (source text). */
const HEALTH = `@Injectable()
class Health {
  constructor(
    private readonly health: HealthCheckService,
    private readonly redlock: RedlockHealthIndicator,
  ) {}

  check(): Promise<HealthCheckResult> {
    return this.health.check([() => this.redlock.isHealthy('locks')]);
  }
}
`;

/** Both apps' sleep helper (source text). */
const SLEEP = `const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
`;

/** Both apps' locked route: held 400 ms, so that a second request meets it (source text). */
const LOCKED_ROUTE = `  @Get(':id')
  @Locked('consumer:order:{params.id}')
  async get(@Param('id') id: string): Promise<{ id: string }> {
    await sleep(400);
    return { id };
  }
`;

/** src/main.ts of the consumer app. Reads the masters' URLs from `URLS` (comma-separated). */
export const consumerMain = `import 'reflect-metadata';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Controller, Get, Injectable, Module, Param } from '@nestjs/common';
import type { ExecutionContext, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { RpcException } from '@nestjs/microservices';
import { HealthCheckService, TerminusModule } from '@nestjs/terminus';
import type { HealthCheckResult } from '@nestjs/terminus';
import { WsException } from '@nestjs/websockets';
import {
  InvalidConfigurationError,
  LockContendedError,
  Locked,
  LockedInterceptor,
  RedlockModule,
  RedlockService,
} from 'nestjs-redlock';
import type { LockErrorPayload } from 'nestjs-redlock';
import { RedlockHealthIndicator } from 'nestjs-redlock/health';
import { RedlockTestingController, RedlockTestingModule } from 'nestjs-redlock/testing';

${SLEEP}
@Injectable()
class Jobs {
  constructor(private readonly redlock: RedlockService) {}

  @Locked('consumer:job:{args.0}')
  async run(id: string): Promise<number | undefined> {
    await sleep(1);
    return id ? this.redlock.current()?.fencingToken : undefined;
  }
}

/** Exposes the interceptor's transport mapping (a documented extension point). */
@Injectable()
class MappingProbe extends LockedInterceptor {
  map(error: unknown, type: 'rpc' | 'ws'): unknown {
    return this.mapError(error, { getType: () => type } as unknown as ExecutionContext);
  }
}

@Controller('orders')
class OrdersController {
  constructor(private readonly jobs: Jobs) {}

  @Get('job/:id')
  async job(@Param('id') id: string): Promise<{ token: number | undefined }> {
    return { token: await this.jobs.run(id) };
  }

${LOCKED_ROUTE}}

${HEALTH}

@Module({
  imports: [
    TerminusModule,
    // 250 ms per master (default 50): the app runs beside the rest of the suite, and a held
    // resource must answer 423, not 503 because the last attempt's masters answered too late
    // on a loaded machine (a flake check once got 503 on the provider route below).
    RedlockModule.forRoot({
      clients: (process.env.URLS ?? '').split(','),
      quarantine: false,
      requestTimeout: 250,
    }),
  ],
  controllers: [OrdersController],
  providers: [Jobs, Health, RedlockHealthIndicator, MappingProbe],
})
class AppModule {}

@Module({ imports: [RedlockTestingModule.forRoot()], providers: [Jobs] })
class TestingAppModule {}

${HTTP_GET}

async function main(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const port = (app.getHttpServer().address() as AddressInfo).port;
  const redlock = app.get(RedlockService);

  // @Locked() on a provider method (no interceptor): runs under the lock, sees its token.
  const providerToken = await app.get(Jobs).run('1');

  // RedlockService: acquire, contention, fencing token.
  const lock = await redlock.acquire('consumer:x');
  const second = await redlock.acquire('consumer:x', { retryCount: 0 }).catch((e: unknown) => e);
  const lockToken = lock.fencingToken;
  await lock.release();

  // @Locked() on a controller handler (interceptor): the second concurrent call gets a 423.
  const first = get(port, '/orders/7');
  await sleep(100);
  const http = [await get(port, '/orders/7'), await first].sort((a, b) => a[0] - b[0]);

  // nestjs-redlock/health with @nestjs/terminus.
  const report = await app.get(Health).check();
  const locks = report.info?.locks as { status?: string; usable?: number } | undefined;

  // A lock error from a provider method called by a route: answered by the module's filter. Held
  // far longer than the call's retry budget (about 3.5 s): with a 5 s ttl, a loaded machine that
  // took 1.5 s to reach the route let the key expire first and the call was granted (200).
  const held = await redlock.acquire('consumer:job:9', { ttl: 30_000 });
  const providerHttp = await get(port, '/orders/job/9');
  await held.release();

  // Transport errors: the optional (ESM-only from Nest 12 on) transport packages were loaded
  // when the module started.
  const probe = app.get(MappingProbe);
  const rpc = probe.map(second, 'rpc');
  const ws = probe.map(second, 'ws');
  await app.close();

  // nestjs-redlock/testing: the same service and @Locked() without Redis.
  const mem = await NestFactory.createApplicationContext(TestingAppModule, { logger: false });
  const control = mem.get(RedlockTestingController);
  control.hold('consumer:job:2');
  const whileHeld = await mem.get(Jobs).run('2').catch((e: unknown) => e);
  control.free('consumer:job:2');
  const afterFree = await mem.get(Jobs).run('2').then(() => 'resolved');
  await mem.close();

  // Telemetry without @opentelemetry/api.
  const otelApi: string = '@opentelemetry/api';
  const apiInstalled = await import(otelApi).then(
    () => true,
    () => false,
  );
  const explicitModule = (): Type<unknown> => {
    @Module({
      imports: [
        RedlockModule.forRoot({ clients: (process.env.URLS ?? '').split(','), telemetry: true }),
      ],
    })
    class ExplicitTelemetryModule {}
    return ExplicitTelemetryModule;
  };
  const explicit = await Promise.resolve()
    .then(() =>
      NestFactory.createApplicationContext(explicitModule(), { logger: false, abortOnError: false }),
    )
    .then(
    async (ctx) => {
      await ctx.close();
      return 'booted';
    },
    (e: unknown) => (e instanceof InvalidConfigurationError ? e.name : String(e)),
  );

  console.log(
    JSON.stringify({
      providerToken: typeof providerToken,
      lockToken: typeof lockToken,
      contended: second instanceof LockContendedError,
      http,
      providerHttp,
      health: { status: report.status, locks: locks?.status, usable: locks?.usable },
      rpc: {
        isRpcException: rpc instanceof RpcException,
        code: ((rpc as RpcException).getError() as LockErrorPayload).code,
      },
      ws: {
        isWsException: ws instanceof WsException,
        code: ((ws as WsException).getError() as LockErrorPayload).code,
      },
      testing: { whileHeld: whileHeld instanceof LockContendedError, afterFree },
      telemetry: { apiInstalled, explicit },
    }),
  );
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
`;

/**
 * src/main.ts of the node-redis consumer app: the app passes its own node-redis clients (one per
 * URL of `URLS`, connected) to `forRootAsync`; locks, contention (423), health and fencing work
 * through them, and the module leaves them open at shutdown (the app closes them).
 */
export const consumerNodeRedisMain = `import 'reflect-metadata';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Controller, Get, Injectable, Module, Param } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HealthCheckService, TerminusModule } from '@nestjs/terminus';
import type { HealthCheckResult } from '@nestjs/terminus';
import {
  LockContendedError,
  Locked,
  RedlockModule,
  RedlockService,
  fencedRead,
  fencedWrite,
} from 'nestjs-redlock';
import { RedlockHealthIndicator } from 'nestjs-redlock/health';
import { createClient } from 'redis';

${SLEEP}
const clients = await Promise.all(
  (process.env.URLS ?? '').split(',').map((url) =>
    createClient({ url })
      .on('error', () => undefined)
      .connect(),
  ),
);

@Controller('orders')
class OrdersController {
${LOCKED_ROUTE}}

${HEALTH}

@Module({
  imports: [
    TerminusModule,
    RedlockModule.forRootAsync({
      useFactory: () => ({ clients, quarantine: false, requestTimeout: 250 }),
    }),
  ],
  controllers: [OrdersController],
  providers: [Health, RedlockHealthIndicator],
})
class AppModule {}

${HTTP_GET}

const app = await NestFactory.create(AppModule, { logger: false });
await app.listen(0, '127.0.0.1');
const port = (app.getHttpServer().address() as AddressInfo).port;
const redlock = app.get(RedlockService);

const lock = await redlock.acquire('consumer:nr');
const second = await redlock.acquire('consumer:nr', { retryCount: 0 }).catch((e: unknown) => e);
const lockToken = lock.fencingToken;
const written = await fencedWrite(clients[0], 'consumer:nr:data', lockToken ?? 0, 'v');
const read = await fencedRead(clients[0], 'consumer:nr:data');
await lock.release();

const first = get(port, '/orders/7');
await sleep(100);
const http = [await get(port, '/orders/7'), await first].sort((a, b) => a[0] - b[0]);

const report = await app.get(Health).check();
const locks = report.info?.locks as { status?: string; usable?: number } | undefined;
await app.close();
const openAfterClose = clients.every((c) => c.isOpen);
await Promise.all(clients.map((c) => c.close()));

console.log(
  JSON.stringify({
    lockToken: typeof lockToken,
    contended: second instanceof LockContendedError,
    fenced: written && read?.value === 'v',
    http,
    health: { status: report.status, locks: locks?.status, usable: locks?.usable },
    openAfterClose,
  }),
);
`;

/** What the node-redis app prints when every check passed. */
export const consumerNodeRedisExpected = {
  lockToken: 'number',
  contended: true,
  fenced: true,
  http: [
    [200, false],
    [423, true],
  ],
  health: { status: 'ok', locks: 'up', usable: 3 },
  openAfterClose: true,
};
