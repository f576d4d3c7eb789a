/**
 * The redis-servers started by the harness must not outlive the process that started them, even
 * when that process is SIGKILLed (a hung jest worker, CI killing jest, `kill -9` of the sample):
 * its 'exit' handlers never run then, and only the watchdog (redis-masters.ts) is left to act.
 */
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { repoPath } from '../harness/paths';
import { waitForPing } from '../harness/redis-masters';
import { waitUntil } from '../harness/util';

interface ChildReport {
  pids: number[];
  ports: number[];
  mode: string;
}

const started: number[] = [];
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  // Never leak servers, even when the test fails (i.e. when the watchdog does not work).
  for (const pid of started.splice(0)) {
    if (!isRunning(pid)) continue;
    try {
      process.kill(pid, 'SIGCONT');
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
});

/** True while `pid` exists and is not a zombie (an unreaped zombie is dead). */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z /s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return process.platform !== 'linux'; // on Linux: gone meanwhile
  }
}

/** Starts the fixture and resolves with its report once its masters are up. */
function startChild(env: NodeJS.ProcessEnv): Promise<{ pid: number; report: ChildReport }> {
  const child = spawn(
    process.execPath,
    [
      '-r',
      'ts-node/register/transpile-only',
      repoPath('test', 'core', 'fixtures', 'harness-child.ts'),
      '3',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
  );
  children.push(child);
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null): void =>
      reject(new Error(`fixture exited early (${code}): ${err}`));
    child.once('exit', onExit);
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      child.off('exit', onExit);
      const report = JSON.parse(out.slice(0, nl)) as ChildReport;
      started.push(...report.pids);
      resolve({ pid: child.pid!, report });
    });
  });
}

async function killChildAndExpectServersGone(env: NodeJS.ProcessEnv): Promise<ChildReport> {
  const { pid, report } = await startChild(env);
  expect(report.pids).toHaveLength(4);
  // All up; the last one is paused (SIGSTOP) and must die all the same.
  for (const p of report.pids) expect(isRunning(p)).toBe(true);
  await Promise.all(report.ports.slice(0, -1).map((port) => waitForPing(port, 1000)));

  process.kill(pid, 'SIGKILL');

  await waitUntil(() => report.pids.every((p) => !isRunning(p)), 5000).catch(() => {
    const alive = report.pids.filter(isRunning);
    throw new Error(`redis-server(s) outlived the SIGKILLed process: pids ${alive.join(', ')}`);
  });
  return report;
}

it('servers die with the process that started them, even on SIGKILL (default watchdog)', async () => {
  const report = await killChildAndExpectServersGone({ REDLOCK_HARNESS_WATCHDOG: undefined });
  // Where util-linux's setpriv is available, the kernel's parent-death signal does it.
  const setpriv = spawnSync('setpriv', ['--pdeathsig', 'KILL', '--', 'true']).status === 0;
  expect(report.mode).toBe(setpriv ? 'pdeathsig' : 'sh');
});

it('servers die with the process that started them, even on SIGKILL (sh watchdog)', async () => {
  const report = await killChildAndExpectServersGone({ REDLOCK_HARNESS_WATCHDOG: 'sh' });
  expect(report.mode).toBe('sh');
});
