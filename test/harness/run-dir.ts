/**
 * Second line of defence against leaked `redis-server` processes (the first is the watchdog in
 * redis-masters.ts, which makes each server die with the process that started it).
 *
 * jest's globalSetup creates a run directory and exports it as REDLOCK_HARNESS_RUN_DIR; every
 * process of the run (jest workers and the processes they spawn) then records each server it
 * starts as `<pid>.pid` (content: the port) there, and removes the file when the server exits.
 * globalTeardown kills whatever is still recorded, and globalSetup does the same for the run
 * directories of earlier runs whose jest process is gone (a CI runner killed jest outright).
 *
 * A recorded pid is only killed if that process is still a redis-server on the recorded port, so
 * a recycled pid is never hit.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Environment variable holding the run directory of the current jest run. */
export const RUN_DIR_ENV = 'REDLOCK_HARNESS_RUN_DIR';
const PREFIX = 'redlock-harness-run-';
const OWNER = 'owner';

/** The run directory of the current jest run, if any. */
export function runDir(): string | undefined {
  return process.env[RUN_DIR_ENV] || undefined;
}

/** Records a started server (no-op outside a jest run). Never throws. */
export function recordServer(pid: number | undefined, port: number): void {
  const dir = runDir();
  if (!dir || !pid) return;
  try {
    writeFileSync(join(dir, `${pid}.pid`), `${port}\n`);
  } catch {
    // The run directory is gone (teardown already ran): nothing to record into.
  }
}

/** Forgets a server that has exited. Never throws. */
export function forgetServer(pid: number | undefined): void {
  const dir = runDir();
  if (!dir || !pid) return;
  try {
    unlinkSync(join(dir, `${pid}.pid`));
  } catch {
    // Already swept.
  }
}

/** Creates the run directory of a jest run owned by the current process. */
export function createRunDir(): string {
  const dir = mkdtempSync(join(tmpdir(), PREFIX));
  writeFileSync(join(dir, OWNER), `${process.pid}\n`);
  return dir;
}

/** Kills the servers still recorded in `dir`, removes it, and returns the pids killed. */
export function sweepRunDir(dir: string): number[] {
  const killed: number[] = [];
  let names: string[] = [];
  try {
    names = readdirSync(dir);
  } catch {
    return killed;
  }
  for (const name of names) {
    const m = /^(\d+)\.pid$/.exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
    let port = NaN;
    try {
      port = Number(readFileSync(join(dir, name), 'utf8').trim());
    } catch {
      continue;
    }
    if (!isRedisOnPort(pid, port)) continue;
    try {
      process.kill(pid, 'SIGCONT'); // a paused server must be able to die
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      // Exited meanwhile.
    }
  }
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {
    // Another user's directory: leave it.
  }
  return killed;
}

/** Sweeps the run directories (in the temp directory) of earlier runs whose owner is gone. */
export function sweepAbandonedRunDirs(): number[] {
  const killed: number[] = [];
  let names: string[] = [];
  try {
    names = readdirSync(tmpdir());
  } catch {
    return killed;
  }
  for (const name of names) {
    if (!name.startsWith(PREFIX)) continue;
    const dir = join(tmpdir(), name);
    let owner: number;
    try {
      owner = Number(readFileSync(join(dir, OWNER), 'utf8').trim());
    } catch {
      continue; // not ours, or being created right now
    }
    if (owner === process.pid || isAlive(owner)) continue;
    killed.push(...sweepRunDir(dir));
  }
  return killed;
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A zombie (dead, not yet reaped) is not alive.
  try {
    return !/^\d+ \(.*\) Z /s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true; // no /proc: trust kill(0)
  }
}

/**
 * True if `pid` is a live redis-server listening on `port`. redis-server sets its title to
 * `redis-server 127.0.0.1:<port>`; before it exec()s (the `sh` watchdog), the command line still
 * names redis-server and `--port <port>`. A zombie has an empty command line.
 */
function isRedisOnPort(pid: number, port: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port)) return false;
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && process.platform === 'linux')
      return false;
    const ps = spawnSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8' });
    cmdline = ps.status === 0 ? ps.stdout : '';
  }
  return /redis-server/.test(cmdline) && new RegExp(`(^|[^\\d])${port}([^\\d]|$)`).test(cmdline);
}
