/**
 * `@Locked()` with `shared: true` and `limit: n`, through the interceptor (HTTP handlers) and the
 * method wrapper (provider methods), against 3 real masters; and the kind-mismatch answer (409).
 */
import 'reflect-metadata';
import { Controller, Get, Injectable, Module, Param, Post } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { InvalidConfigurationError, KindMismatchError } from '../../lib/core/base/errors';
import { Locked } from '../../lib/decorators/locked.decorator';
import { normalizeOptions } from '../../lib/options';
import { RedlockModule } from '../../lib/redlock.module';
import { RedlockService } from '../../lib/redlock.service';
import { RedisMasters } from '../harness/redis-masters';
import { uniqueResource, waitUntil } from '../harness/util';

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const gates = new Map<string, Promise<void>>();
let inside = 0;
let most = 0;

async function holdOpen(key: string): Promise<void> {
  inside++;
  most = Math.max(most, inside);
  try {
    await gates.get(key);
  } finally {
    inside--;
  }
}

@Injectable()
class ExportService {
  @Locked('export:{args.0}', { limit: 2, onLocked: 'skip' })
  async run(id: string): Promise<string> {
    await holdOpen(`export:${id}`);
    return 'done';
  }

  @Locked('doc:{args.0}', { shared: true })
  async read(id: string): Promise<string | undefined> {
    return svc.current(`doc:${id}`)?.lock.kind;
  }

  /** A plain lock around a shared one re-enters; the reverse is a mismatch (no upgrade). */
  @Locked('doc:{args.0}')
  async writeThenRead(id: string): Promise<string | undefined> {
    return this.read(id);
  }

  @Locked('doc:{args.0}', { shared: true })
  async readThenWrite(id: string): Promise<string> {
    return this.write(id);
  }

  @Locked('doc:{args.0}')
  async write(_id: string): Promise<string> {
    return 'written';
  }
}

@Controller('docs')
class DocsController {
  @Get(':id')
  @Locked('doc:{params.id}', { shared: true })
  async read(@Param('id') id: string): Promise<{ id: string }> {
    await holdOpen(`doc:${id}`);
    return { id };
  }

  @Post(':id')
  @Locked('doc:{params.id}')
  write(@Param('id') id: string): { id: string } {
    return { id };
  }

  @Post(':id/export')
  @Locked('doc:{params.id}', { limit: 3 })
  export(@Param('id') id: string): { id: string } {
    return { id };
  }
}

@Module({ providers: [ExportService], controllers: [DocsController] })
class FeatureModule {}

let masters: RedisMasters;
let app: INestApplication;
let svc: RedlockService;

beforeAll(async () => {
  masters = await RedisMasters.start(3);
  const moduleRef = await Test.createTestingModule({
    imports: [
      RedlockModule.forRoot({
        clients: masters.urls,
        quarantine: false,
        requestTimeout: 500,
        isGlobal: true,
      }),
      FeatureModule,
    ],
  }).compile();
  app = moduleRef.createNestApplication({ logger: false });
  await app.listen(0, '127.0.0.1');
  svc = app.get(RedlockService);
});

afterAll(async () => {
  await app?.close();
  await masters.stop();
});

it('shared handlers run together; a plain handler on the resource answers 423 meanwhile', async () => {
  const id = uniqueResource('d');
  const gate = deferred();
  gates.set(`doc:${id}`, gate.promise);
  const server = app.getHttpServer();
  const reads = [1, 2, 3].map(() =>
    request(server)
      .get(`/docs/${id}`)
      .then((r) => r.status),
  );
  inside = 0;
  await waitUntil(async () => inside === 3); // three readers inside at once
  await request(server).post(`/docs/${id}`).expect(423);
  gate.resolve();
  expect(await Promise.all(reads)).toEqual([200, 200, 200]);
  await request(server).post(`/docs/${id}`).expect(201);
});

it('a semaphore method admits `limit` calls at once and skips the rest', async () => {
  const exports = app.get(ExportService);
  const id = uniqueResource('e');
  const gate = deferred();
  gates.set(`export:${id}`, gate.promise);
  most = 0;
  const first = [exports.run(id), exports.run(id)];
  await waitUntil(async () => inside === 2);
  expect(await exports.run(id)).toBeUndefined(); // skipped: both slots taken
  gate.resolve();
  expect(await Promise.all(first)).toEqual(['done', 'done']);
  expect(most).toBe(2);
});

it('a kind mismatch answers 409 without Retry-After, and throws KindMismatchError in methods', async () => {
  const id = uniqueResource('m');
  const server = app.getHttpServer();
  const reader = await svc.acquire(`doc:${id}`, { shared: true });
  const res = await request(server).post(`/docs/${id}/export`).expect(409);
  expect(res.headers['retry-after']).toBeUndefined();
  await reader.release();
  const sem = await svc.acquire(`doc:${id}`, { limit: 3 });
  await expect(app.get(ExportService).read(id)).rejects.toBeInstanceOf(KindMismatchError);
  await sem.release();
});

it('reentrancy: a shared call inside a plain one re-enters; a plain call inside a shared one is a mismatch', async () => {
  const exports = app.get(ExportService);
  expect(await exports.writeThenRead(uniqueResource('w'))).toBe('mutex');
  await expect(exports.readThenWrite(uniqueResource('r'))).rejects.toBeInstanceOf(
    KindMismatchError,
  );
});

it('validates the options at decoration time and refuses them in lockedDefaults', () => {
  const decorate = (options: object) => () =>
    Locked('x', options)(class {}.prototype, 'm', { value: () => 1 });
  expect(decorate({ shared: true, limit: 2 })).toThrow(InvalidConfigurationError);
  expect(decorate({ limit: 0 })).toThrow(/limit/);
  expect(decorate({ shared: 1 })).toThrow(/shared/);
  expect(() =>
    normalizeOptions({ clients: masters.urls, lockedDefaults: { shared: true } }),
  ).toThrow(/lockedDefaults.shared/);
});
