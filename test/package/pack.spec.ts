/**
 * Packaging: `npm pack` the package once, then install the tarball with a plain `npm install`
 * (no `--legacy-peer-deps`, no `--force`) into fresh consumer Nest apps, compile each with its own
 * strict TypeScript that also checks every declaration file, and boot it against real
 * redis-server masters:
 * - `esm-newest`: an ES module app (`"type": "module"`, `nodenext`) on the newest majors we
 *   claim (Nest 12, ioredis 6, terminus 12) — the app `nest new` makes today;
 * - `cjs-nest12`: a CommonJS app on Nest 12 + ioredis 6 (Nest 12 is ESM-only: require(esm));
 * - `cjs-nest11`: a CommonJS app on Nest 11 + ioredis 5 + terminus 11;
 * - `lowest`: the lowest version of every range we claim (Nest 10.0.0, ioredis 5.0.3, ...);
 * - `node-redis`: an ES module app on the newest majors that passes its own node-redis clients
 *   (`redis`, an optional peer) and lists no ioredis: npm installs that required peer itself.
 *
 * The apps are derived from `peerDependencies`, so changing a claimed range changes what is
 * tested; a range that does not admit the installed versions fails the install. Proves the
 * `exports` map (both conditions), the typings, the `files` list and the three entry points
 * (`nestjs-redlock`, `/testing`, `/health`). The installs run in parallel on one npm cache.
 */
import { jest } from '@jest/globals';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../harness/paths';
import { RedisMasters } from '../harness/redis-masters';
import {
  consumerEsmTsconfig,
  consumerExpected,
  consumerMain,
  consumerNodeRedisExpected,
  consumerNodeRedisMain,
  consumerTsconfig,
} from './consumer';

const root = REPO_ROOT;
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  peerDependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
jest.setTimeout(600_000);

/** The peers a consumer app installs (all of them, optional ones included). */
const PEERS = [
  '@nestjs/common',
  '@nestjs/core',
  '@nestjs/microservices',
  '@nestjs/websockets',
  '@nestjs/terminus',
  'ioredis',
  'reflect-metadata',
  'rxjs',
];

/** The lowest version a range of `^x.y.z` alternatives (joined by `||`) admits. */
function lowestOf(range: string): string {
  const versions = range.split('||').map((alt) => {
    const m = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(alt);
    if (!m) throw new Error(`unsupported peer range ${JSON.stringify(range)}: use ^x.y.z || ...`);
    return [Number(m[1]), Number(m[2]), Number(m[3])];
  });
  versions.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
  return versions[0].join('.');
}

/** The highest major a range of `^x.y.z` alternatives admits. */
function highestMajorOf(range: string): number {
  return Math.max(...range.split('||').map((alt) => Number(/\^(\d+)/.exec(alt)?.[1])));
}

interface Consumer {
  name: 'esm-newest' | 'cjs-nest12' | 'cjs-nest11' | 'lowest' | 'node-redis';
  module: 'esm' | 'cjs';
  dependencies: Record<string, string>;
  /** The major each listed peer must have been installed at (`lowest`: the exact versions). */
  majors?: Record<string, number>;
  /** Its src/main.ts and what that prints (default: consumerMain, consumerExpected). */
  main?: { source: string; expected: object };
}

const peers = (pick: (range: string, peer: string) => string): Record<string, string> =>
  Object.fromEntries(PEERS.map((p) => [p, pick(pkg.peerDependencies[p], p)]));

/** The alternative of `range` with major `major` (`^x.y.z`), which must be claimed. */
function claimed(range: string, major: number): string {
  const alt = range
    .split('||')
    .map((a) => a.trim())
    .find((a) => a.startsWith(`^${major}.`));
  if (!alt) throw new Error(`${range} does not claim major ${major}`);
  return alt;
}

/** Peers at the given majors (Nest packages share one). */
function peersAt(nest: number, ioredis: number, terminus: number): Record<string, string> {
  return peers((range, peer) => {
    if (peer === 'ioredis') return claimed(range, ioredis);
    if (peer === '@nestjs/terminus') return claimed(range, terminus);
    if (peer.startsWith('@nestjs/')) return claimed(range, nest);
    return range;
  });
}

const majorsOf = (deps: Record<string, string>): Record<string, number> =>
  Object.fromEntries(PEERS.map((p) => [p, Number(/\^(\d+)/.exec(deps[p])?.[1])]));

// The newest major of every claimed range, with npm picking the newest version within it (as
// `npm install @nestjs/core ioredis` in a new app does).
const newest = peers((range) => claimed(range, highestMajorOf(range)));
const nest12 = peersAt(12, 6, 12);
const nest11 = peersAt(11, 5, 11);

/** The newest majors without ioredis (a required peer: npm installs it by itself). */
const { ioredis: _ioredis, ...newestWithoutIoredis } = newest;

const consumers: Consumer[] = [
  {
    name: 'esm-newest',
    module: 'esm',
    dependencies: {
      ...newest,
      // The optional OpenTelemetry API (no SDK): telemetry is then on by default, as a no-op.
      '@opentelemetry/api': pkg.peerDependencies['@opentelemetry/api'],
      '@nestjs/platform-express': pkg.peerDependencies['@nestjs/core'],
      '@types/node': pkg.devDependencies['@types/node'],
      typescript: pkg.devDependencies.typescript,
    },
    majors: Object.fromEntries(PEERS.map((p) => [p, highestMajorOf(pkg.peerDependencies[p])])),
  },
  {
    name: 'cjs-nest12',
    module: 'cjs',
    dependencies: {
      ...nest12,
      '@nestjs/platform-express': nest12['@nestjs/core'],
      '@types/node': pkg.devDependencies['@types/node'],
      typescript: pkg.devDependencies.typescript,
    },
    majors: majorsOf(nest12),
  },
  {
    name: 'cjs-nest11',
    module: 'cjs',
    dependencies: {
      ...nest11,
      '@nestjs/platform-express': nest11['@nestjs/core'],
      '@types/node': pkg.devDependencies['@types/node'],
      typescript: pkg.devDependencies.typescript,
    },
    majors: majorsOf(nest11),
  },
  {
    name: 'node-redis',
    module: 'esm',
    dependencies: {
      ...newestWithoutIoredis,
      redis: claimed(pkg.peerDependencies.redis, highestMajorOf(pkg.peerDependencies.redis)),
      '@nestjs/platform-express': pkg.peerDependencies['@nestjs/core'],
      '@types/node': pkg.devDependencies['@types/node'],
      typescript: pkg.devDependencies.typescript,
    },
    majors: {
      ...Object.fromEntries(
        PEERS.filter((p) => p !== 'ioredis').map((p) => [
          p,
          highestMajorOf(pkg.peerDependencies[p]),
        ]),
      ),
      redis: highestMajorOf(pkg.peerDependencies.redis),
    },
    main: { source: consumerNodeRedisMain, expected: consumerNodeRedisExpected },
  },
  {
    name: 'lowest',
    module: 'cjs',
    dependencies: {
      ...peers(lowestOf),
      '@nestjs/platform-express': lowestOf(pkg.peerDependencies['@nestjs/core']),
      // TypeScript 5.0 is the first to read `const` type parameters, which the typings of
      // nestjs-redlock/health and of @nestjs/terminus 11 use.
      '@types/node': '20.0.0',
      typescript: '5.0.4',
    },
  },
];

/**
 * Diagnostics of a dependency's own declaration files, not of ours: @nestjs/common 10.0.0's
 * file validators do not match their base class under `strict` (fixed in 10.0.1). Any strict
 * app with `skipLibCheck: false` on 10.0.0 gets them, with or without nestjs-redlock.
 */
const UPSTREAM_DIAGNOSTICS: Record<string, RegExp> = {
  '@nestjs/common@10.0.0':
    /^node_modules\/@nestjs\/common\/pipes\/file\/(file-type|max-file-size)\.validator\.d\.ts\(\d+,\d+\): error TS2416:/,
  // ioredis 6.1's error declarations import `redis-errors`, which ships no types (seen on
  // 2026-12-07 with 6.1.0): every strict app with `skipLibCheck: false` gets these, with or
  // without nestjs-redlock. A key ending in '.' names every version it begins.
  'ioredis@6.1.':
    /^node_modules\/ioredis\/built\/errors\/\w+\.d\.ts\(\d+,\d+\): error TS7016: Could not find a declaration file for module 'redis-errors'\./,
};

let work: string;
let tarball: string;
let masters: RedisMasters;

function run(
  cmd: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = {},
): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 150_000,
  });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? String(r.error ?? '') };
}

function runOk(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): string {
  const r = run(cmd, args, cwd, env);
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** Runs a command without blocking the event loop (installs run in parallel). */
function runAsync(cmd: string, args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`${cmd} ${args.join(' ')} in ${cwd} failed (${code}):\n${out}`));
    });
  });
}

/** Writes the consumer app `c` and installs its dependencies and the tarball. */
async function installConsumer(c: Consumer): Promise<void> {
  const app = join(work, c.name);
  mkdirSync(join(app, 'src'), { recursive: true });
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({
      name: `consumer-${c.name}`,
      private: true,
      ...(c.module === 'esm' ? { type: 'module' } : {}),
      dependencies: { [pkg.name]: `file:../${tarball}`, ...c.dependencies },
    }),
  );
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify(c.module === 'esm' ? consumerEsmTsconfig : consumerTsconfig),
  );
  writeFileSync(join(app, 'src', 'main.ts'), c.main?.source ?? consumerMain);
  await runAsync(
    'npm',
    ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'],
    app,
  );
}

function installedVersion(app: string, name: string): string {
  const file = join(app, 'node_modules', ...name.split('/'), 'package.json');
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'redlock-pack-'));
  masters = await RedisMasters.start(3);
  runOk('npm', ['run', 'build'], root);
  runOk('npm', ['pack', '--pack-destination', work], root);
  tarball = `${pkg.name}-${pkg.version}.tgz`;
  installed = Promise.allSettled(consumers.map(installConsumer));
  await installed;
});

let installed: Promise<PromiseSettledResult<void>[]>;

afterAll(async () => {
  await masters?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

it('packs the build, the typings and the docs, not the sources', () => {
  const files = execFileSync('tar', ['-tzf', join(work, tarball)], { encoding: 'utf8' });
  expect(files).toContain('package/dist/index.js');
  expect(files).toContain('package/dist/index.d.ts');
  expect(files).toContain('package/dist/testing/index.d.ts');
  expect(files).toContain('package/dist/health/index.d.ts');
  expect(files).toContain('package/README.md');
  expect(files).toContain('package/CHANGELOG.md');
  expect(files).toContain('package/LICENSE');
  for (const entry of ['index', 'testing/index', 'health/index']) {
    expect(files).toContain(`package/dist/${entry}.mjs`);
    expect(files).toContain(`package/dist/${entry}.d.mts`);
  }
  const listed = files.split('\n').filter(Boolean);
  // Only the build, its typings and the docs: no tests, sources, maps or tooling.
  const unexpected = listed.filter(
    (f) =>
      !/^package\/dist\/.+\.(js|mjs|d\.ts|d\.mts)$/.test(f) &&
      !/^package\/(README\.md|CHANGELOG\.md|LICENSE|package\.json)$/.test(f),
  );
  expect(unexpected).toEqual([]);
  expect(listed.filter((f) => /\.spec\.|\/test\//.test(f))).toEqual([]);
});

describe.each(consumers)('$name consumer app', (consumer) => {
  const { name, dependencies } = consumer;
  it('installs from the tarball, compiles under strict tsc and boots against real masters', async () => {
    const result = (await installed)[consumers.indexOf(consumer)];
    if (result.status === 'rejected') throw result.reason;
    const app = join(work, name);

    const versions = Object.fromEntries(
      Object.keys(dependencies).map((d) => [d, installedVersion(app, d)]),
    );
    console.log(`${name} consumer app: ${JSON.stringify(versions)}`);
    if (!consumer.majors) {
      expect(versions).toEqual(dependencies);
    } else {
      const majors = Object.fromEntries(
        Object.keys(consumer.majors).map((p) => [p, Number(versions[p].split('.')[0])]),
      );
      expect(majors).toEqual(consumer.majors);
    }
    // ioredis is a required peer: npm installed it although the app does not list it.
    expect(existsSync(join(app, 'node_modules', 'ioredis', 'package.json'))).toBe(true);

    // The consumer's own TypeScript; `tsc` still emits when it reports errors.
    const tsc = run(
      process.execPath,
      [join(app, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
      app,
    );
    const diagnostics = `${tsc.stdout}${tsc.stderr}`
      .split('\n')
      .filter((line) => /error TS\d+:/.test(line));
    if (tsc.status !== 0 && diagnostics.length === 0)
      throw new Error(`tsc failed (${tsc.status}):\n${tsc.stdout}\n${tsc.stderr}`);
    // ioredis comes as a peer the app does not list.
    const present = { ...versions, ioredis: installedVersion(app, 'ioredis') };
    const upstream = Object.entries(UPSTREAM_DIAGNOSTICS)
      .filter(([dep]) =>
        Object.entries(present).some(([d, v]) =>
          dep.endsWith('.') ? `${d}@${v}`.startsWith(dep) : `${d}@${v}` === dep,
        ),
      )
      .map(([, pattern]) => pattern);
    const ours = diagnostics.filter((line) => !upstream.some((pattern) => pattern.test(line)));
    expect({ versions, diagnostics: ours }).toEqual({ versions, diagnostics: [] });
    expect(existsSync(join(app, 'dist', 'main.js'))).toBe(true);

    const out = runOk(process.execPath, ['dist/main.js'], app, { URLS: masters.urls.join(',') });
    if (consumer.main) {
      expect(JSON.parse(out.trim().split('\n').pop() as string)).toEqual(consumer.main.expected);
      return;
    }
    const withApi = '@opentelemetry/api' in dependencies;
    expect(JSON.parse(out.trim().split('\n').pop() as string)).toEqual({
      ...consumerExpected,
      telemetry: withApi ? { apiInstalled: true, explicit: 'booted' } : consumerExpected.telemetry,
    });
  });
});
