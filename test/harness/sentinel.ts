/**
 * A Redis Sentinel for tests (`redis-server <config> --sentinel`): a server that answers PING and
 * INFO but keeps no keys, watching one master. The Sentinel needs a config file it can rewrite,
 * so it cannot be a {@link RedisMaster}; it is spawned the same way (tied to this process's life).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { forgetServer, recordServer } from './run-dir';
import { freePort, spawnServer, waitForPing } from './redis-masters';

/** One `redis-server --sentinel` process on 127.0.0.1. */
export class RedisSentinel {
  private constructor(
    readonly port: number,
    private readonly proc: ChildProcess,
    private readonly dir: string,
  ) {}

  /** Starts a Sentinel watching the master on `masterPort`; resolves once it answers PING. */
  static async start(masterPort: number): Promise<RedisSentinel> {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'redlock-sentinel-'));
    const config = join(dir, 'sentinel.conf');
    writeFileSync(
      config,
      `port ${port}\nbind 127.0.0.1\ndir ${dir}\nsentinel monitor watched 127.0.0.1 ${masterPort} 1\n`,
    );
    const proc = spawnServer([config, '--sentinel', '--loglevel', 'warning', '--logfile', '']);
    recordServer(proc.pid, port);
    proc.stderr?.resume();
    const sentinel = new RedisSentinel(port, proc, dir);
    try {
      await waitForPing(port, 5000);
    } catch (err) {
      await sentinel.stop();
      throw err;
    }
    return sentinel;
  }

  /** Kills the Sentinel and removes its directory. */
  async stop(): Promise<void> {
    const { proc } = this;
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await exited;
    }
    forgetServer(proc.pid);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
