/**
 * Packaging: `npm pack` the package once, then install the tarball into two fresh consumer Nest
 * apps — one with the LOWEST versions of the peer dependencies we claim, one with the HIGHEST
 * (the newest npm finds within the claimed ranges) — compile each with a strict tsconfig that
 * also checks every declaration file, and boot it against real redis-server masters.
 *
 * Both apps are derived from `peerDependencies`, so changing a claimed range changes what is
 * tested. npm resolves the peers without `--legacy-peer-deps`: a range that does not admit the
 * installed versions fails the install. Proves the `exports` map, the typings, the `files` list
 * and the three entry points (`nestjs-redlock`, `/testing`, `/health`) for a consumer.
 */
import { jest } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../harness/paths';
import { RedisMasters } from '../harness/redis-masters';
import { consumerExpected, consumerMain, consumerTsconfig } from './consumer';

const root = REPO_ROOT;
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  peerDependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
jest.setTimeout(300_000);

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
  name: 'lowest' | 'highest';
  dependencies: Record<string, string>;
}

const peers = (pick: (range: string) => string): Record<string, string> =>
  Object.fromEntries(PEERS.map((p) => [p, pick(pkg.peerDependencies[p])]));

const consumers: Consumer[] = [
  {
    name: 'lowest',
    dependencies: {
      ...peers(lowestOf),
      '@nestjs/platform-express': lowestOf(pkg.peerDependencies['@nestjs/core']),
      // Node ≥ 20 (engines); TypeScript 5.0 is the first to read `const` type parameters, which
      // the typings of nestjs-redlock/health and of @nestjs/terminus 11 use.
      '@types/node': '20.0.0',
      typescript: '5.0.4',
    },
  },
  {
    name: 'highest',
    dependencies: {
      // The claimed ranges themselves: npm installs the newest versions they admit.
      ...peers((range) => range),
      // The optional OpenTelemetry API (no SDK): telemetry is then on by default, as a no-op.
      // The lowest app goes without it: nothing may be loaded or required then.
      '@opentelemetry/api': pkg.peerDependencies['@opentelemetry/api'],
      '@nestjs/platform-express': pkg.peerDependencies['@nestjs/core'],
      '@types/node': pkg.devDependencies['@types/node'],
      typescript: pkg.devDependencies.typescript,
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
});

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
  expect(files).not.toMatch(/package\/(test|sample|bench|lib)\//);
});

describe.each(consumers)('$name supported versions', ({ name, dependencies }) => {
  it('install from the tarball, compile under strict tsc and boot against real masters', () => {
    const app = join(work, name);
    mkdirSync(join(app, 'src'), { recursive: true });
    writeFileSync(
      join(app, 'package.json'),
      JSON.stringify({
        name: `consumer-${name}`,
        private: true,
        dependencies: { [pkg.name]: `file:../${tarball}`, ...dependencies },
      }),
    );
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(consumerTsconfig));
    writeFileSync(join(app, 'src', 'main.ts'), consumerMain);

    runOk(
      'npm',
      ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'],
      app,
    );

    const versions = Object.fromEntries(
      Object.keys(dependencies).map((d) => [d, installedVersion(app, d)]),
    );
    console.log(`${name} consumer app: ${JSON.stringify(versions)}`);
    if (name === 'lowest') {
      expect(versions).toEqual(dependencies);
    } else {
      for (const p of PEERS) {
        expect(`${p}@${Number(versions[p].split('.')[0])}`).toBe(
          `${p}@${highestMajorOf(pkg.peerDependencies[p])}`,
        );
      }
    }

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
    const upstream = Object.entries(UPSTREAM_DIAGNOSTICS)
      .filter(([dep]) => Object.entries(versions).some(([d, v]) => `${d}@${v}` === dep))
      .map(([, pattern]) => pattern);
    const ours = diagnostics.filter((line) => !upstream.some((pattern) => pattern.test(line)));
    expect({ versions, diagnostics: ours }).toEqual({ versions, diagnostics: [] });
    expect(existsSync(join(app, 'dist', 'main.js'))).toBe(true);

    const out = runOk(process.execPath, ['dist/main.js'], app, { URLS: masters.urls.join(',') });
    const withApi = '@opentelemetry/api' in dependencies;
    expect(JSON.parse(out.trim().split('\n').pop() as string)).toEqual({
      ...consumerExpected,
      telemetry: withApi
        ? { apiInstalled: true, loaded: true, explicit: 'booted' }
        : consumerExpected.telemetry,
    });
  });
});
