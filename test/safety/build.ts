/**
 * Transpiles the worker and the library it imports to plain JavaScript once per soak, so that
 * each worker process starts with `node` alone instead of loading a TypeScript compiler (several
 * seconds of CPU per worker on a busy 2-core machine). Same per-file transpilation as
 * `ts-node --transpile-only` and ts-jest's `isolatedModules`, with the project's tsconfig.
 */
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import * as ts from 'typescript';

import { REPO_ROOT } from '../harness/paths';

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

/**
 * Writes `lib/**` and the soak's worker as JavaScript under `outDir` (keeping the repository
 * layout) and returns the worker's path. Run it with `NODE_PATH=<root>/node_modules`.
 */
export function buildWorker(outDir: string): string {
  const options = compilerOptions();
  const files = [...tsFiles(join(ROOT, 'lib')), join(HERE, 'worker.ts'), join(HERE, 'protocol.ts')];
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
