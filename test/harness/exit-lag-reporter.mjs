/**
 * A jest reporter that fails a run whose process is kept alive after the tests by something the
 * tests left behind (a ref'd timer, socket, child process). In a jest worker that is what ends in
 * "A worker process has failed to exit gracefully and has been force exited": the worker gets
 * 500 ms to exit once its last test file is done.
 *
 * Run one spec file per process, in band, so that the handles are that file's:
 *
 *   npm test -- --runInBand --reporters default --reporters ./test/harness/exit-lag-reporter.mjs \
 *     --runTestsByPath test/core/foo.spec.ts
 *
 * Once the run is complete it lists the resources keeping the event loop alive; if the process
 * is still alive 500 ms later it prints them again and sets exit code 1.
 */
import { setTimeout } from 'node:timers';

const LIMIT_MS = 500;

function alive() {
  const counts = {};
  // TTYWrap: jest's own stdout / stderr.
  for (const type of process.getActiveResourcesInfo()) {
    if (type !== 'TTYWrap') counts[type] = (counts[type] ?? 0) + 1;
  }
  return JSON.stringify(counts);
}

export default class ExitLagReporter {
  onRunComplete() {
    const done = Date.now();
    process.stderr.write(`exit-lag: at the end of the run, alive: ${alive()}\n`);
    setTimeout(() => {
      process.stderr.write(
        `exit-lag: FAILED: still alive ${Date.now() - done} ms after the run: ${alive()}\n`,
      );
      process.exitCode = 1;
    }, LIMIT_MS).unref();
  }
}
