/**
 * Packaging: `npm pack` the package, install the tarball into a fresh temporary Nest app (from the
 * npm cache that `npm ci` filled), compile it with a typical Nest tsconfig (CommonJS), and boot it
 * against a real redis-server. Proves the `exports` map, the typings, the `files` list and the
 * `nestjs-redlock/testing` subpath work for a consumer.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { RedisMasters } from '../harness/redis-masters';

const root = resolve(__dirname, '..', '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  devDependencies: Record<string, string>;
};
jest.setTimeout(300_000);
let work: string;
let masters: RedisMasters;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'redlock-pack-'));
  masters = await RedisMasters.start(3);
});

afterAll(async () => {
  await masters.stop();
  rmSync(work, { recursive: true, force: true });
});

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): string {
  const r = spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 240_000,
  });
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

it('installs from the tarball into a fresh Nest app, compiles and boots', () => {
  run('npm', ['run', 'build'], root);
  run('npm', ['pack', '--pack-destination', work], root);
  const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'));
  expect(tarball).toBeDefined();
  const files = execFileSync('tar', ['-tzf', join(work, tarball as string)], { encoding: 'utf8' });
  expect(files).toContain('package/dist/index.js');
  expect(files).toContain('package/dist/index.d.ts');
  expect(files).not.toMatch(/package\/(test|sample|bench|lib)\//);

  const app = join(work, 'app');
  const deps = [
    '@nestjs/common',
    '@nestjs/core',
    'ioredis',
    'reflect-metadata',
    'rxjs',
    '@types/node',
  ];
  run('mkdir', ['-p', join(app, 'src')], work);
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({
      name: 'consumer',
      private: true,
      dependencies: {
        'nestjs-redlock': `file:../${tarball}`,
        ...Object.fromEntries(deps.map((d) => [d, pkg.devDependencies[d]])),
      },
    }),
  );
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
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
    }),
  );
  writeFileSync(
    join(app, 'src', 'main.ts'),
    `import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Locked, RedlockModule, RedlockService, LockContendedError } from 'nestjs-redlock';
import { RedlockTestingModule } from 'nestjs-redlock/testing';

@Injectable()
class Job {
  constructor(readonly redlock: RedlockService) {}
  @Locked('consumer:{args.0}')
  async work(id: string): Promise<number | undefined> {
    return this.redlock.current()?.fencingToken;
  }
}

@Module({
  imports: [RedlockModule.forRoot({ clients: (process.env.URLS ?? '').split(','), quarantine: false })],
  providers: [Job],
})
class AppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  const token = await app.get(Job).work('42');
  const held = await app.get(RedlockService).acquire('consumer:x');
  const second = await app.get(RedlockService).acquire('consumer:x', { retryCount: 0 }).catch((e: unknown) => e);
  await held.release();
  await app.close();
  console.log(JSON.stringify({ token: typeof token, contended: second instanceof LockContendedError, testing: typeof RedlockTestingModule }));
}
main().catch((e) => { console.error(e); process.exit(1); });
`,
  );
  // Everything comes from the npm cache filled by `npm ci` (no network needed).
  run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'], app);
  run(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
    app,
  );
  const out = run(process.execPath, ['dist/main.js'], app, { URLS: masters.urls.join(',') });
  expect(JSON.parse(out.trim().split('\n').pop() as string)).toEqual({
    token: 'number',
    contended: true,
    testing: 'function',
  });
});
