/**
 * Transpiles the worker and the library it imports to plain JavaScript, so that each worker
 * process starts with `node` alone instead of loading a TypeScript compiler (several seconds of
 * CPU per worker on a busy 2-core machine). Same per-file transpilation as
 * `ts-node --transpile-only` and ts-jest's `isolatedModules`, with the project's tsconfig.
 *
 * {@link cachedWorker} builds once per content: the build (seconds on a busy machine) is kept
 * under a hash of the sources and the compiler options, so the runs of one test file, or of one
 * jest run, share it, and a changed source gets a build of its own.
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join, relative } from 'node:path';
import * as ts from 'typescript';

import { REPO_ROOT } from '../harness/paths';
import { runDir } from '../harness/run-dir';

/** Repository root. */
export const ROOT = REPO_ROOT;
const HERE = join(ROOT, 'test', 'safety');

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return tsFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts') && !e.name.endsWith('.d.ts')
      ? [path]
      : [];
  });
}

function compilerOptions(): ts.CompilerOptions {
  const file = join(ROOT, 'tsconfig.json');
  const { config, error } = ts.readConfigFile(file, (p) => ts.sys.readFile(p));
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, ROOT, undefined, file);
  return {
    ...parsed.options,
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    noEmit: false,
    declaration: false,
    sourceMap: false,
    inlineSourceMap: false,
  };
}

function sources(): string[] {
  return [...tsFiles(join(ROOT, 'lib')), join(HERE, 'worker.ts'), join(HERE, 'protocol.ts')];
}

/** How long an unused cached build is kept (ms): older ones are removed by the next build. */
const CACHE_KEEP_MS = 24 * 3600_000;

/**
 * The worker built from the sources as they are now, reusing an earlier identical build (see
 * the file's header): in the jest run directory when there is one (swept with it), else in a
 * per-user directory under the temp directory. Concurrent builders each build into a temp
 * directory and rename it into place; rename is atomic, and the loser's identical build is
 * discarded.
 */
export function cachedWorker(): string {
  const options = compilerOptions();
  const files = sources();
  const hash = createHash('sha256').update(JSON.stringify(options));
  for (const file of files) hash.update(relative(ROOT, file)).update(readFileSync(file));
  const key = hash.digest('hex').slice(0, 16);
  const cache = cacheDir();
  const target = join(cache, key);
  const worker = join(target, relative(ROOT, join(HERE, 'worker.js')));
  if (existsSync(worker)) return worker;
  const temp = join(cache, `.${key}.${process.pid}.${randomBytes(4).toString('hex')}`);
  try {
    build(temp, options, files);
    renameSync(temp, target);
  } catch (err) {
    rmSync(temp, { recursive: true, force: true });
    if (!existsSync(worker)) throw err; // else another process renamed its build first
  }
  sweep(cache, key);
  return worker;
}

function cacheDir(): string {
  const run = runDir();
  const candidates = run ? [join(run, 'safety-build')] : [];
  candidates.push(join(tmpdir(), `redlock-safety-build-${userInfo().uid}`));
  for (const dir of candidates) {
    try {
      mkdirSync(dir, { recursive: true });
      return dir;
    } catch {
      // The run directory is gone (its teardown ran): use the next one.
    }
  }
  throw new Error('no directory to build the safety worker in');
}

/** Removes cached builds other than `keep` that were made over {@link CACHE_KEEP_MS} ago. */
function sweep(cache: string, keep: string): void {
  for (const name of readdirSync(cache)) {
    if (name === keep) continue;
    const path = join(cache, name);
    try {
      if (Date.now() - statSync(path).mtimeMs > CACHE_KEEP_MS)
        rmSync(path, { recursive: true, force: true });
    } catch {
      // removed meanwhile
    }
  }
}

/**
 * Writes `files` (`lib/**` and the soak's worker) as JavaScript under `outDir` (keeping the
 * repository layout) and returns the worker's path. Run it with `NODE_PATH=<root>/node_modules`.
 */
function build(outDir: string, options: ts.CompilerOptions, files: readonly string[]): string {
  for (const file of files) {
    const out = join(outDir, relative(ROOT, file)).replace(/\.ts$/, '.js');
    const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), {
      compilerOptions: options,
      fileName: file,
    });
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, outputText);
  }
  return join(outDir, relative(ROOT, join(HERE, 'worker.js')));
}
