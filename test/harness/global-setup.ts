/**
 * jest globalSetup: creates the run directory in which every harness process of this run records
 * the redis-servers it starts (see run-dir.ts), and first sweeps those left by earlier runs whose
 * jest process was killed.
 */
import { createRunDir, RUN_DIR_ENV, sweepAbandonedRunDirs } from './run-dir';

export default function globalSetup(): void {
  const killed = sweepAbandonedRunDirs();
  if (killed.length)
    console.warn(`\nKilled ${killed.length} redis-server(s) left by an earlier, killed test run`);
  // Workers are started after globalSetup and inherit the environment.
  process.env[RUN_DIR_ENV] = createRunDir();
}
