import { createRequire } from 'node:module';
import { join } from 'node:path';

/*
 * Optional peer dependencies (@opentelemetry/api, @nestjs/microservices, @nestjs/websockets) are
 * loaded only when they are used, so that an application without them pays nothing.
 *
 * - CommonJS peers are loaded synchronously with `require`. The package is shipped as CommonJS,
 *   where `require` is this module's own. When these sources run as ES modules instead (the test
 *   runner's ESM mode), there is no `require`; a require rooted at the working directory stands in.
 * - ESM-only peers (every `@nestjs/*` package from Nest 12 on) are loaded with `import()`, which
 *   both module systems support (require(esm) needs Node ≥ 20.19 / 22.12, as Nest 12 itself).
 */

declare const require: NodeJS.Require | undefined;

const load: NodeJS.Require =
  typeof require === 'function' ? require : createRequire(join(process.cwd(), 'index.js'));

/** `require(name)`, or `undefined` when the package is not installed or cannot be loaded. */
export function requireOptional<T>(name: string): T | undefined {
  try {
    return load(name) as T;
  } catch {
    return undefined;
  }
}

/** `import(name)`, resolving to `undefined` when the package is not installed. */
export async function importOptional<T>(name: string): Promise<T | undefined> {
  try {
    return (await import(name)) as T;
  } catch {
    return undefined;
  }
}
