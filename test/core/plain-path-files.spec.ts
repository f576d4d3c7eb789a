/**
 * The plain path in files: which lib/ files run during one warm, uncontended acquire + release
 * of a plain lock (scripts/plain-path.ts: V8's precise coverage around it, on 3 real masters).
 * None is in the fair mode's folder: the default mode runs none of the fair mode's code. (No cap
 * on the number of files: a count invites merging files of different concerns to fit it.)
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { repoPath } from '../harness/paths';

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
  it('runs no file of the fair mode in the default mode', async () => {
    const files = await pathFiles();
    expect(files).toContain('lib/core/redis/kinds/mutex.ts');
    expect(files).toContain('lib/core/quorum/round.ts');
    expect(files.filter((f) => f.startsWith('lib/core/fair/'))).toEqual([]);
  }, 90_000);

  it('the probe sees the fair mode when it is on (the check can fail)', async () => {
    const files = await pathFiles('across-processes');
    expect(files.some((f) => f.startsWith('lib/core/fair/'))).toBe(true);
  }, 90_000);
});
