// Module customization hooks (registered by ./register.mjs) that run this repository's TypeScript
// sources as native ES modules: `npm run sample` is `node --import ./scripts/ts-esm/register.mjs
// sample/main.ts`. The sources are written for `moduleResolution: bundler` (extensionless
// relative imports, as the test runner resolves them), so the hooks do what a bundler-style
// resolver does for files of this repository, and nothing for packages in node_modules:
//
// - resolve: a relative import without an extension that Node cannot find is tried as `<x>.ts`,
//   then `<x>/index.ts`;
// - load: a `.ts` file is compiled to an ES module with the compiler options of
//   tsconfig.jest.json (the ones the test runner compiles the same files with: ES2022 modules,
//   decorators with emitted metadata, inline source maps).
//
// Packages (Nest 12, ioredis, ...) are resolved and loaded by Node itself, as in any ES module app.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { URL, fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const configPath = join(root, 'tsconfig.jest.json');
const parsed = ts.getParsedCommandLineOfConfigFile(
  configPath,
  {},
  {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  },
);
if (!parsed) throw new Error(`cannot read ${configPath}`);
const compilerOptions = { ...parsed.options, noEmit: false, declaration: false };

/** A file of this repository (not of a dependency). */
function isOwn(url) {
  return url.startsWith('file:') && !url.includes('/node_modules/');
}

function isFile(path) {
  return existsSync(path) && statSync(path).isFile();
}

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (err) {
    const relative = specifier.startsWith('./') || specifier.startsWith('../');
    if (!relative || !context.parentURL || !isOwn(context.parentURL)) throw err;
    const base = fileURLToPath(new URL(specifier, context.parentURL));
    for (const candidate of [`${base}.ts`, join(base, 'index.ts')]) {
      if (isFile(candidate)) return { url: pathToFileURL(candidate).href, shortCircuit: true };
    }
    throw err;
  }
}

export async function load(url, context, nextLoad) {
  if (!isOwn(url) || !url.endsWith('.ts')) return nextLoad(url, context);
  const fileName = fileURLToPath(url);
  const { outputText } = ts.transpileModule(readFileSync(fileName, 'utf8'), {
    compilerOptions,
    fileName,
  });
  return { format: 'module', source: outputText, shortCircuit: true };
}
