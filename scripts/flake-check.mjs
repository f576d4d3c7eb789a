#!/usr/bin/env node
/**
 * `npm run test:flakes -- [--runs <n, default 10>] [--busy <cores, default 1>] [jest args...]`
 *
 * Runs the test suite n times in a row while a CPU-heavy process (a node busy loop per core
 * asked for) runs beside it, and stops at the first failing run, printing which tests failed.
 * A test that fails once in twenty runs is a defect; this is the check for it. Extra arguments
 * go to jest (e.g. `--selectProjects integration`, or a spec path to hammer one file).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const n = Number(args[i + 1]);
  if (!Number.isInteger(n) || n < 0) {
    console.error(`${name} needs a non-negative integer`);
    process.exit(2);
  }
  args.splice(i, 2);
  return n;
};
const runs = option('--runs', 10);
const busyCores = option('--busy', 1);

const dir = mkdtempSync(join(tmpdir(), 'redlock-flakes-'));
const busy = Array.from({ length: busyCores }, () =>
  spawn(process.execPath, ['-e', 'for (;;) Math.sqrt(Math.random());'], { stdio: 'ignore' }),
);
const cleanup = () => {
  for (const p of busy) p.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
};
process.on('exit', cleanup);
process.once('SIGINT', () => process.exit(130));
process.once('SIGTERM', () => process.exit(143));

/** Runs the suite once (`npm test`, jest's JSON report into a file); resolves with the report. */
function runSuite(outputFile) {
  return new Promise((resolve) => {
    const child = spawn('npm', ['test', '--', '--json', `--outputFile=${outputFile}`, ...args], {
      stdio: 'inherit',
    });
    child.on('exit', (code, signal) => {
      let report;
      try {
        report = JSON.parse(readFileSync(outputFile, 'utf8'));
      } catch {
        report = undefined; // jest did not get as far as writing it
      }
      resolve({ code: code ?? (signal ? 1 : 0), report });
    });
  });
}

/** Failed tests (and suites that failed outside any test) of a jest JSON report. */
function failures(report) {
  const lines = [];
  for (const file of report?.testResults ?? []) {
    const path = relative(process.cwd(), file.name);
    const failed = file.assertionResults.filter((a) => a.status === 'failed');
    for (const a of failed) {
      lines.push(`${path} › ${a.fullName}`);
      if (a.failureMessages?.[0]) lines.push(indent(a.failureMessages[0]));
    }
    if (file.status === 'failed' && failed.length === 0) {
      lines.push(`${path} (suite failed outside a test)`);
      if (file.message) lines.push(indent(file.message));
    }
  }
  return lines;
}

const indent = (text) =>
  text
    .split('\n')
    .filter((l) => !/node_modules|node:internal/.test(l))
    .slice(0, 12)
    .map((l) => `      ${l}`)
    .join('\n');

const started = Date.now();
console.log(`flake check: ${runs} run(s) with ${busyCores} busy core(s) beside the suite`);
for (let i = 1; i <= runs; i++) {
  const t0 = Date.now();
  const { code, report } = await runSuite(join(dir, `run-${i}.json`));
  const took = ((Date.now() - t0) / 1000).toFixed(0);
  if (code !== 0) {
    console.error(`\nflake check: run ${i}/${runs} FAILED after ${took} s (exit code ${code}):`);
    const lines = failures(report);
    console.error(lines.length ? lines.join('\n') : '  (no JSON report: see the output above)');
    process.exit(1);
  }
  console.log(`\nflake check: run ${i}/${runs} passed in ${took} s`);
}
const total = ((Date.now() - started) / 60_000).toFixed(1);
console.log(`flake check: ${runs} run(s) in a row passed under load (${total} min)`);
process.exit(0); // the busy loops would keep this process alive: exit runs the clean-up
