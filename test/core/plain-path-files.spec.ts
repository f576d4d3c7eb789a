/**
 * The plain path in files: which lib/ files run during one warm, uncontended acquire + release
 * of a plain lock (scripts/plain-path.ts: V8's precise coverage around it, on 3 real masters).
 * None is in the fair mode's folder, and the path does not grow unnoticed.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { repoPath } from '../harness/paths';

/** The files on the path today (docs/architecture.md "Reading the algorithm in one sitting"). */
const MOST_FILES = 21;

async function pathFiles(...args: string[]): Promise<string[]> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      repoPath('node_modules/ts-node/dist/bin.js'),
      '--transpile-only',
      repoPath('scripts/plain-path.ts'),
      '--json',
      ...args,
    ],
    { cwd: repoPath(), timeout: 60_000 },
  );
  return JSON.parse(stdout.trim().split('\n').pop() ?? '[]') as string[];
}

describe('the plain path', () => {
  it(`runs at most ${MOST_FILES} files of lib/, none of the fair mode, in the default mode`, async () => {
    const files = await pathFiles();
    expect(files).toContain('lib/core/redis/kinds/mutex.ts');
    expect(files).toContain('lib/core/quorum/round.ts');
    expect(files.filter((f) => f.startsWith('lib/core/fair/'))).toEqual([]);
    expect(files.length).toBeLessThanOrEqual(MOST_FILES);
  }, 90_000);

  it('the probe sees the fair mode when it is on (the check can fail)', async () => {
    const files = await pathFiles('across-processes');
    expect(files.some((f) => f.startsWith('lib/core/fair/'))).toBe(true);
  }, 90_000);
});
