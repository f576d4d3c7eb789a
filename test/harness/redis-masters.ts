/**
 * Test harness: independent `redis-server` processes on 127.0.0.1, with fault controls.
 *
 * - No persistence unless asked; each server listens on a free loopback port.
 * - Readiness is polled with PING under a deadline (no fixed sleeps).
 * - Every server dies with the process that started it, however that process ends (normal exit,
 *   exception, SIGTERM, SIGKILL of a hung jest worker): see {@link watchdogMode}. In a jest run the
 *   servers are also recorded for the globalTeardown sweep (run-dir.ts).
 */
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis, { RedisOptions } from 'ioredis';
import { forgetServer, recordServer, runDir } from './run-dir';

const REDIS_SERVER = process.env.REDIS_SERVER_BIN ?? 'redis-server';
const SETPRIV = process.env.SETPRIV_BIN ?? 'setpriv';
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const p of live) p.kill('SIGKILL');
});

/**
 * How a server is tied to the life of this process:
 *
 * - `pdeathsig` (Linux, the default when util-linux's `setpriv` is there): the server is started
 *   as `setpriv --pdeathsig KILL -- redis-server ...`. setpriv sets PR_SET_PDEATHSIG and exec()s
 *   redis-server, so the kernel sends SIGKILL to the server the moment its parent dies, whatever
 *   the cause, SIGSTOPped or not. No extra process, no polling; the pid is the server's own, so
 *   kill/pause/resume are unchanged. (The signal follows the exit of the *thread* that spawned the
 *   server: from a worker_thread, servers die when that thread ends.)
 * - `sh` (anywhere else, e.g. macOS): `sh -c` forks a watchdog subshell, then exec()s
 *   redis-server (same pid again). The watchdog blocks reading fd 3, a socket whose other end
 *   only this process holds: it reads end-of-file when this process dies and then SIGKILLs the
 *   server; when the harness itself saw the server exit it writes a newline instead, and the
 *   watchdog leaves quietly (so a recycled pid is never hit). One forked shell per server, idle.
 *
 * REDLOCK_HARNESS_WATCHDOG=pdeathsig|sh forces a mode.
 */
export type WatchdogMode = 'pdeathsig' | 'sh';
let mode: WatchdogMode | undefined;

/** The watchdog used for the servers of this process (probed once). */
export function watchdogMode(): WatchdogMode {
  if (mode) return mode;
  const forced = process.env.REDLOCK_HARNESS_WATCHDOG;
  if (forced === 'pdeathsig' || forced === 'sh') return (mode = forced);
  const probe = spawnSync(SETPRIV, ['--pdeathsig', 'KILL', '--', 'true'], { stdio: 'ignore' });
  return (mode = probe.status === 0 ? 'pdeathsig' : 'sh');
}

// $0 is 'sh', "$@" the redis-server command line. The watchdog gets no stdio (it must not hold the
// server's stderr pipe open); exec closes fd 3 in the server.
const SH_WATCHDOG =
  '{ read -r line <&3 || kill -9 $$; } </dev/null >/dev/null 2>&1 & exec "$@" 3<&-';

/**
 * Spawns `redis-server args...` tied to this process's life (see {@link watchdogMode}); the
 * caller waits for it and kills it (a Sentinel, test/harness/sentinel.ts, uses it directly).
 */
export function spawnServer(
  args: string[],
  extraEnv?: Readonly<Record<string, string>>,
): ChildProcess {
  const env = extraEnv ? { ...process.env, ...extraEnv } : undefined;
  if (watchdogMode() === 'pdeathsig') {
    return spawn(SETPRIV, ['--pdeathsig', 'KILL', '--', REDIS_SERVER, ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env,
    });
  }
  const proc = spawn('/bin/sh', ['-c', SH_WATCHDOG, 'sh', REDIS_SERVER, ...args], {
    stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
    env,
  });
  const lifeline = proc.stdio[3] as Socket | null;
  if (lifeline) {
    lifeline.on('error', () => undefined);
    lifeline.resume();
    // Release the watchdog once the server is gone.
    proc.once('exit', () => lifeline.end('\n'));
  }
  return proc;
}

/** Options for a set of masters. */
export interface MastersOptions {
  /** Keep data with AOF (`appendonly yes`, `appendfsync always`). Default false. */
  appendFsyncAlways?: boolean;
  /** Extra `redis-server` arguments, e.g. `['--requirepass', 's3cret']`. */
  extraArgs?: string[];
  /**
   * Extra environment variables of the server process, over this process's own (e.g. the
   * LD_PRELOAD of the wall-clock shim, test/harness/faults/clock-shift.ts). An option because
   * jest gives each test file a copy of `process.env`: setting a variable there does not reach
   * the processes that node:child_process spawns.
   */
  env?: Readonly<Record<string, string>>;
}

/** Asks the OS for a free TCP port on loopback. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() =>
        typeof address === 'object' && address
          ? resolve(address.port)
          : reject(new Error('no port')),
      );
    });
  });
}

/** Resolves when a PING on `port` answers PONG, or rejects after `timeoutMs`. */
export async function waitForPing(
  port: number,
  timeoutMs = 5000,
  password?: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await pingOnce(port, password)) return;
    if (Date.now() > deadline)
      throw new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The port was taken by another server between {@link freePort} and our server's start (another
 * test file, or a master restarted on its port): the PING was answered by that other server and
 * ours could not bind. Starting again on fresh ports is safe.
 */
export class PortTakenError extends Error {}

/** Whether the server on `port` is the one using `dir` (`CONFIG GET dir`): ours, not another. */
function servesDir(port: number, dir: string, password?: string): Promise<boolean> {
  return askOnce(port, password, 'CONFIG GET dir', 2000, (buf) => {
    // `*2 $3 dir $<len> <path>`, after `+OK` for AUTH; an error reply (`-...`) is not ours.
    const m = /\$3\r\ndir\r\n\$(\d+)\r\n/.exec(buf);
    if (!m) return /(^|\r\n)-/.test(buf) ? false : undefined;
    const start = m.index + m[0].length;
    const len = Number(m[1]);
    return buf.length >= start + len ? buf.slice(start, start + len) === dir : undefined;
  });
}

/** Retries `start` (on fresh ports) when a port was taken meanwhile; at most 3 times. */
async function onFreshPorts<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (!(err instanceof PortTakenError) || attempt >= 3) throw err;
    }
  }
}

function pingOnce(port: number, password?: string): Promise<boolean> {
  return askOnce(port, password, 'PING', 500, (buf) =>
    buf.includes('+PONG') ? true : buf.includes('-') ? false : undefined,
  );
}

/**
 * Sends one inline `command` (after `AUTH`, with a password) to the server on `port` over a
 * fresh socket; `verdict` reads the replies so far: true/false once they tell, `undefined` to
 * wait for more. `false` on a connection error or after `timeoutMs`.
 */
function askOnce(
  port: number,
  password: string | undefined,
  command: string,
  timeoutMs: number,
  verdict: (replies: string) => boolean | undefined,
): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let buf = '';
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(port, '127.0.0.1', () =>
      socket.write(`${password ? `AUTH ${password}\r\n` : ''}${command}\r\n`),
    );
    socket.on('data', (d) => {
      buf += d.toString();
      const ok = verdict(buf);
      if (ok !== undefined) done(ok);
    });
  });
}

/**
 * A fresh data directory: inside the jest run directory when there is one, so that the teardown
 * sweep removes it even if this process is killed before cleanup().
 */
function dataDir(): string {
  const run = runDir();
  if (run) {
    try {
      return mkdtempSync(join(run, 'redlock-master-'));
    } catch {
      // The run is over (or the variable is stale): fall back to the temp directory.
    }
  }
  return mkdtempSync(join(tmpdir(), 'redlock-master-'));
}

/** One `redis-server` process. */
export class RedisMaster {
  private proc: ChildProcess | undefined;
  private readonly dir: string;
  private password: string | undefined;

  constructor(
    readonly port: number,
    private readonly options: MastersOptions = {},
  ) {
    this.dir = dataDir();
    const i = options.extraArgs?.indexOf('--requirepass') ?? -1;
    this.password = i >= 0 ? options.extraArgs?.[i + 1] : undefined;
  }

  /** `redis://127.0.0.1:port`. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** PID of the running process, if any. */
  get pid(): number | undefined {
    return this.proc?.pid;
  }

  /** Starts the server and waits until it answers PING. */
  async start(): Promise<void> {
    if (this.proc) return;
    const args = [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--dir',
      this.dir,
      '--save',
      '',
      '--daemonize',
      'no',
      '--loglevel',
      'warning',
      '--logfile',
      '',
      ...(this.options.appendFsyncAlways
        ? ['--appendonly', 'yes', '--appendfsync', 'always']
        : ['--appendonly', 'no']),
      ...(this.options.extraArgs ?? []),
    ];
    const proc = spawnServer(args, this.options.env);
    this.proc = proc;
    live.add(proc);
    recordServer(proc.pid, this.port);
    proc.once('exit', () => {
      live.delete(proc);
      forgetServer(proc.pid);
      if (this.proc === proc) this.proc = undefined;
    });
    proc.stderr?.resume();
    await waitForPing(this.port, 5000, this.password);
    if (!(await servesDir(this.port, realpathSync(this.dir), this.password))) {
      proc.kill('SIGKILL');
      throw new PortTakenError(`port ${this.port} is served by another redis-server`);
    }
  }

  /** SIGKILL: the server dies at once, losing everything (no persistence). */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc) return;
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGCONT'); // a paused process must be able to die
      proc.kill('SIGKILL');
      await exited;
    }
    this.proc = undefined;
  }

  /** SIGSTOP: the server stops answering but keeps its connections open. */
  pause(): void {
    this.proc?.kill('SIGSTOP');
  }

  /** SIGCONT: resume after {@link pause}. */
  resume(): void {
    this.proc?.kill('SIGCONT');
  }

  /** Kills the server and starts it again on the same port: it comes back empty. */
  async restart(): Promise<void> {
    await this.kill();
    await this.start();
  }

  /** Kills the server, waits `ms`, then starts it again on the same port. */
  async stopFor(ms: number): Promise<void> {
    await this.kill();
    await new Promise((r) => setTimeout(r, ms));
    await this.start();
  }

  /** Removes the data directory (call after kill). */
  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** N independent masters plus helpers to create clients for them. */
export class RedisMasters {
  readonly masters: RedisMaster[];
  private readonly clients: Redis[] = [];

  private constructor(masters: RedisMaster[]) {
    this.masters = masters;
  }

  /** Starts `n` masters on free loopback ports. */
  static start(n: number, options: MastersOptions = {}): Promise<RedisMasters> {
    return onFreshPorts(() => RedisMasters.startOnce(n, options));
  }

  private static async startOnce(n: number, options: MastersOptions): Promise<RedisMasters> {
    assertRedisServer();
    const masters: RedisMaster[] = [];
    const seen = new Set<number>();
    while (masters.length < n) {
      const port = await freePort();
      if (seen.has(port)) continue;
      seen.add(port);
      masters.push(new RedisMaster(port, options));
    }
    const set = new RedisMasters(masters);
    try {
      await Promise.all(masters.map((m) => m.start()));
    } catch (err) {
      await set.stop();
      throw err;
    }
    return set;
  }

  /** Connection URLs of the masters. */
  get urls(): string[] {
    return this.masters.map((m) => m.url);
  }

  /**
   * Creates one ioredis client per master with lock-friendly settings (fail fast when a master is
   * down, reconnect quickly). The clients are closed by {@link stop}.
   */
  createClients(overrides: RedisOptions = {}): Redis[] {
    const clients = lockClients(this.masters, overrides);
    this.clients.push(...clients);
    return clients;
  }

  /** Waits until every client is `ready`. */
  static async ready(clients: Redis[], timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!clients.every((c) => c.status === 'ready')) {
      if (Date.now() > deadline) throw new Error('clients not ready');
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Closes the clients made here and kills every master. */
  async stop(): Promise<void> {
    await Promise.all(this.clients.splice(0).map((c) => closeClient(c)));
    await Promise.all(this.masters.map((m) => m.kill()));
    for (const m of this.masters) m.cleanup();
  }
}

/**
 * One ioredis client per master on 127.0.0.1 with lock-friendly settings: fail fast when a master
 * is down, reconnect quickly, errors swallowed (the engine reports them).
 */
export function lockClients(
  masters: readonly { readonly port: number }[],
  overrides: RedisOptions = {},
): Redis[] {
  return masters.map((m) => {
    const c = new Redis({
      host: '127.0.0.1',
      port: m.port,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
      // Do not keep the test process alive for 2 s after disconnecting from a killed master.
      disconnectTimeout: 100,
      ...overrides,
    });
    c.on('error', () => undefined);
    return c;
  });
}

/**
 * Disconnects a client and waits (at most 1 s) for its socket to end, so that no ioredis
 * disconnect timer outlives the test.
 */
export function closeClient(c: Redis): Promise<void> {
  if (c.status === 'end') return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 1000);
    c.once('end', () => {
      clearTimeout(timer);
      resolve();
    });
    c.disconnect();
  });
}

function assertRedisServer(): void {
  const r = spawnSync(REDIS_SERVER, ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    throw new Error(
      `${REDIS_SERVER} not found: install it (Debian: apt-get install -y redis-server) or set REDIS_SERVER_BIN`,
    );
  }
}

/**
 * A local Redis Cluster of `n` masters (no replicas), made with `redis-cli --cluster create`;
 * one node (which `redis-cli` refuses) gets every slot with CLUSTER ADDSLOTSRANGE.
 */
export class LocalCluster {
  private constructor(readonly nodes: RedisMaster[]) {}

  /** Starts the nodes, creates the cluster and waits until `cluster_state:ok`. */
  static start(n = 3): Promise<LocalCluster> {
    return onFreshPorts(() => LocalCluster.startOnce(n));
  }

  private static async startOnce(n: number): Promise<LocalCluster> {
    assertRedisServer();
    const nodes: RedisMaster[] = [];
    for (let i = 0; i < n; i++) {
      nodes.push(
        new RedisMaster(await freePort(), {
          extraArgs: [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            'nodes.conf',
            '--cluster-node-timeout',
            '2000',
            // Without it a node that never met another one reports an empty IP in CLUSTER SLOTS.
            '--cluster-announce-ip',
            '127.0.0.1',
          ],
        }),
      );
    }
    const cluster = new LocalCluster(nodes);
    try {
      await Promise.all(nodes.map((m) => m.start()));
      if (n === 1) await LocalCluster.takeEverySlot(nodes[0].port);
      else LocalCluster.create(nodes);
      const deadline = Date.now() + 10_000;
      for (;;) {
        const states = await Promise.all(
          nodes.map(async (m) => {
            const c = new Redis({ host: '127.0.0.1', port: m.port, lazyConnect: true });
            try {
              await c.connect();
              return /cluster_state:ok/.test(await c.cluster('INFO'));
            } finally {
              c.disconnect();
            }
          }),
        );
        if (states.every(Boolean)) break;
        if (Date.now() > deadline) throw new Error('cluster did not reach cluster_state:ok');
        await new Promise((r) => setTimeout(r, 50));
      }
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  /** Makes a cluster of the nodes with `redis-cli --cluster create` (three nodes at least). */
  private static create(nodes: readonly RedisMaster[]): void {
    const create = spawnSync(
      process.env.REDIS_CLI_BIN ?? 'redis-cli',
      [
        '--cluster',
        'create',
        ...nodes.map((m) => `127.0.0.1:${m.port}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    if (create.status !== 0)
      throw new Error(`redis-cli --cluster create failed: ${create.stderr || create.stdout}`);
  }

  /** A one-node cluster: the node takes every slot itself. */
  private static async takeEverySlot(port: number): Promise<void> {
    const c = new Redis({ host: '127.0.0.1', port, lazyConnect: true });
    try {
      await c.connect();
      await c.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    } finally {
      c.disconnect();
    }
  }

  /** Seed nodes for an ioredis `Cluster`. */
  get seeds(): { host: string; port: number }[] {
    return this.nodes.map((m) => ({ host: '127.0.0.1', port: m.port }));
  }

  /** Kills every node. */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((m) => m.kill()));
    for (const m of this.nodes) m.cleanup();
  }
}
