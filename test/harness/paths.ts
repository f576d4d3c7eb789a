import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The repository's root: the nearest directory, from the working directory up, whose
 * package.json is this package's. Test files locate fixtures through it instead of `__dirname`,
 * which ES modules (jest's ESM mode, used since Nest 12 is ESM-only) do not have, while the same
 * helpers also run as CommonJS under ts-node (the safety CLI, worker processes).
 */
export const REPO_ROOT = findRoot(process.cwd());

/** A path inside the repository, from `/`-separated segments relative to its root. */
export function repoPath(...segments: string[]): string {
  return join(REPO_ROOT, ...segments);
}

function findRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      const { name } = JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string };
      if (name === 'nestjs-redlock') return dir;
    }
    if (dirname(dir) === dir) {
      throw new Error(`not inside the nestjs-redlock repository: ${from}`);
    }
  }
}
