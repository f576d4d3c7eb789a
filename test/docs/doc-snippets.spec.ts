/**
 * The documentation's code works as written: every ` ```ts ` block of README.md and docs/*.md is
 * compiled as a file of a user's ES module Nest app (`"type": "module"`, `nodenext`, `strict`)
 * against `lib/` under the package's names, and the README's app is run: its quick start
 * (AppModule + OrdersController) and its health module are booted against three real
 * redis-servers (201, then 423 while the order is held, health up), and its testing example
 * runs here as the test it is. Conventions for blocks: test/docs/doc-blocks.ts.
 */
import { afterAll, beforeAll, expect, it, describe } from '@jest/globals';
import type { INestApplication, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { Redis } from 'ioredis';
import request from 'supertest';
import ts from 'typescript';
import { RedlockService } from '../../lib/redlock.service';
import { repoPath } from '../harness/paths';
import { closeClient, RedisMasters } from '../harness/redis-masters';
import { readBlocks } from './doc-blocks';
import type { DocBlock } from './doc-blocks';

const DOCS = [
  'README.md',
  ...readdirSync(repoPath('docs'))
    // docs/api.md is generated from the API reports (test/docs/api-docs.spec.ts checks it): its
    // blocks are the reports' declarations, not code of an app.
    .filter((f) => f.endsWith('.md') && f !== 'api.md')
    .sort()
    .map((f) => `docs/${f}`),
];
const blocks = DOCS.flatMap((doc) => readBlocks(repoPath(doc), doc));

/** The quick start's development masters, replaced by the harness's ports when it is run. */
const DEV_PORTS = ['7001', '7002', '7003'];

interface Written {
  block: DocBlock;
  /** Where the block was written for the compiler. */
  path: string;
  /** Lines of prelude before the block's first line. */
  offset: number;
}

// The blocks are written out twice under a directory of this run: `check/` as they are (for the
// compiler), `run/` with the development masters' addresses read from the environment (for jest
// to import). The directory's name starts with a dot: no tsconfig or lint glob picks it up.
const workDir = mkdtempSync(repoPath('test', 'docs', '.app-'));
const written: Written[] = [];
for (const block of blocks) {
  if (block.skip) continue;
  const slug = block.doc.replace(/\.md$/, '').replace(/[^\w]+/g, '-');
  const name = block.file ?? `snippet-${block.line}.ts`;
  const prelude = block.prelude
    ? readFileSync(repoPath('test', 'docs', 'preludes', `${block.prelude}.ts`), 'utf8')
    : '';
  const offset = prelude ? prelude.split('\n').length - 1 : 0;
  for (const variant of ['check', 'run']) {
    const path = join(workDir, variant, slug, name);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(join(workDir, variant, slug, 'package.json'), '{ "type": "module" }\n');
    let code = prelude + block.code;
    if (variant === 'run') {
      DEV_PORTS.forEach((port, i) => {
        code = code.replace(
          `'redis://127.0.0.1:${port}'`,
          `\`redis://127.0.0.1:\${process.env.DOC_TEST_PORT_${i}}\``,
        );
      });
    }
    writeFileSync(path, code);
    if (variant === 'check') written.push({ block, path, offset });
  }
}
const readmeApp = join(workDir, 'run', 'README');

afterAll(() => rmSync(workDir, { recursive: true, force: true }));

/** A user's ES module app's compiler options, with the package's names mapped to `lib/`. */
const compilerOptions: ts.CompilerOptions = {
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  target: ts.ScriptTarget.ES2022,
  strict: true,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  esModuleInterop: true,
  skipLibCheck: true,
  noEmit: true,
  types: ['node'],
  paths: {
    'nestjs-redlock': [repoPath('lib', 'index.ts')],
    'nestjs-redlock/testing': [repoPath('lib', 'testing', 'index.ts')],
    'nestjs-redlock/health': [repoPath('lib', 'health', 'index.ts')],
    // The README's testing example imports vitest, which this repository does not install: jest
    // has the same `it` and `expect` for what the example uses.
    vitest: [repoPath('node_modules', '@jest', 'globals', 'build', 'index.d.ts')],
  },
};

/** "README.md:57: TS2307 Cannot find module ..." for every error in the written blocks. */
function compileErrors(): string[] {
  const program = ts.createProgram(
    written.map((w) => w.path),
    compilerOptions,
  );
  const errors: string[] = [];
  for (const w of written) {
    const source = program.getSourceFile(w.path);
    if (!source) throw new Error(`not compiled: ${w.path}`);
    const diagnostics = [
      ...program.getSyntacticDiagnostics(source),
      ...program.getSemanticDiagnostics(source),
    ];
    for (const d of diagnostics) {
      const { line } = source.getLineAndCharacterOfPosition(d.start ?? 0);
      const docLine = w.block.line + line - w.offset;
      const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
      errors.push(`${w.block.doc}:${docLine}: TS${d.code} ${text}`);
    }
  }
  return errors;
}

it('finds the blocks (the quick start, the health module and the testing example among them)', () => {
  const files = blocks.filter((b) => b.doc === 'README.md').map((b) => b.file);
  expect(files).toEqual(
    expect.arrayContaining([
      'src/app.module.ts',
      'src/orders/orders.controller.ts',
      'src/health/health.module.ts',
      'test/orders.e2e-spec.ts',
    ]),
  );
  expect(relative(repoPath(), workDir)).toMatch(/^test[/\\]docs[/\\]\.app-/);
});

it('compiles every TypeScript block of README.md and docs/*.md as an ES module app', () => {
  expect(compileErrors()).toEqual([]);
});

describe('the README app, run against three redis-servers', () => {
  let masters: RedisMasters;
  let app: INestApplication | undefined;
  // The clients the app creates: a snippet that breaks the boot leaves them connected (Nest
  // closes nothing of a module that failed to compile), and they would keep jest from exiting.
  const clients = new Set<Redis>();
  const connect = Redis.prototype.connect;

  beforeAll(async () => {
    Redis.prototype.connect = function (this: Redis, ...args: Parameters<Redis['connect']>) {
      clients.add(this);
      return connect.apply(this, args);
    };
    masters = await RedisMasters.start(3);
    masters.masters.forEach((m, i) => (process.env[`DOC_TEST_PORT_${i}`] = String(m.port)));
    const { AppModule } = (await import(join(readmeApp, 'src', 'app.module.ts'))) as {
      AppModule: Type;
    };
    const { HealthModule } = (await import(
      join(readmeApp, 'src', 'health', 'health.module.ts')
    )) as {
      HealthModule: Type;
    };
    const moduleRef = await Test.createTestingModule({
      imports: [AppModule, HealthModule],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });

  afterAll(async () => {
    await app?.close();
    Redis.prototype.connect = connect;
    // Only those a failed boot left connected: the app closed its own, and a disconnect() of an
    // ended client arms ioredis's disconnect timer (500 ms here) on a socket that closed already,
    // which nothing clears — it kept the jest worker alive past jest's 500 ms exit limit.
    await Promise.all([...clients].map((c) => closeClient(c)));
    await masters?.stop();
  });

  /** The booted app (the boot failed when it is undefined). */
  function booted(): INestApplication {
    if (!app) throw new Error('the README app did not boot');
    return app;
  }

  it('locks a route: 201, then 423 with Retry-After while the order is held', async () => {
    const server = booted().getHttpServer();
    await request(server).post('/orders/42/pay').expect(201, { paid: '42' });

    const lock = await booted().get(RedlockService).acquire('order:42');
    try {
      const held = await request(server).post('/orders/42/pay').expect(423);
      expect(Number(held.headers['retry-after'])).toBeGreaterThan(0);
    } finally {
      await lock.release();
    }
    await request(server).post('/orders/42/pay').expect(201);
  });

  it('answers GET /health with every master up', async () => {
    const res = await request(booted().getHttpServer()).get('/health').expect(200);
    expect(res.body.info.locks.status).toBe('up');
    expect(res.body.info.locks.usable).toBe(3);
  });
});

// The README's testing example is a test: it runs here as written (its `vitest` import is
// jest's, see jest.config.js).
// (Missing, it fails the first test above instead of the whole file.)
const testingExample = join(readmeApp, 'test', 'orders.e2e-spec.ts');
if (existsSync(testingExample)) await import(testingExample);
