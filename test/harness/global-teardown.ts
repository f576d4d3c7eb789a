/**
 * jest globalTeardown: kills any redis-server of this run that is still recorded in the run
 * directory (none, normally: each one dies with the process that started it), then removes the
 * directory.
 */
import { RUN_DIR_ENV, sweepRunDir } from './run-dir';

export default function globalTeardown(): void {
  const dir = process.env[RUN_DIR_ENV];
  if (!dir) return;
  const killed = sweepRunDir(dir);
  if (killed.length)
    console.warn(`\nglobalTeardown killed ${killed.length} leftover redis-server(s): ${killed}`);
}
