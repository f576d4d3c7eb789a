/**
 * A busy process must not turn its own backlog into missed per-node timeouts (item 4;
 * lib/core/base/clock.ts `afterPendingIo`). When the event loop is blocked past the per-node timeout,
 * the round's timer fires in the timers phase, before the poll phase reads the sockets: replies
 * that came back in time were counted as `timeout`, and a free lock was refused as an outage
 * (`NoQuorumError`, HTTP 503). Now the replies already received are read before the timeout ends
 * the round.
 *
 * The loop is blocked synchronously until every master has run the request (seen from outside
 * with `redis-cli`) and answered one later command, so each reply is in our socket when the
 * block ends: no timing assumption about the machine.
 */
import { execFileSync } from 'node:child_process';
import { Redlock } from '../../lib/core/redlock';
import { useMasters } from '../harness/engines';
import { uniqueResource } from '../harness/util';

const REDIS_CLI = process.env.REDIS_CLI_BIN ?? 'redis-cli';

// 20 ms per master: the block below lasts far longer.
const suite = useMasters(3, { requestTimeout: 20, retryCount: 0 });
const engine = (): Redlock => suite.engine();

function cli(port: number, ...args: string[]): string {
  return execFileSync(REDIS_CLI, ['-h', '127.0.0.1', '-p', String(port), ...args], {
    encoding: 'utf8',
    timeout: 5000,
  }).trim();
}

/**
 * Blocks the event loop (synchronously) until `done(port)` holds on every master, then PINGs
 * each one: Redis writes a command's reply before it reads the next command, so our replies are
 * in our sockets by then. At most 10 s; throws when `done` never held.
 */
function blockUntil(done: (port: number) => boolean): void {
  const deadline = Date.now() + 10_000;
  for (const m of suite.masters.masters) {
    while (!done(m.port)) {
      if (Date.now() > deadline) throw new Error(`master ${m.port} did not run the request`);
    }
  }
  for (const m of suite.masters.masters) expect(cli(m.port, 'PING')).toBe('PONG');
}

function pingCalls(port: number): number {
  const line = cli(port, 'INFO', 'commandstats')
    .split('\n')
    .find((l) => l.startsWith('cmdstat_ping:'));
  return Number(/calls=(\d+)/.exec(line ?? '')?.[1] ?? 0);
}

it('grants a free lock whose replies came in while the event loop was blocked', async () => {
  const rl = engine();
  // Connected, masters checked, scripts loaded. With retries: the first attempt waits for the
  // masters' post-connect checks, which a loaded machine can hold past the 20 ms timeout.
  await (await rl.acquire(uniqueResource('warm'), { retryCount: 100 })).release();
  const resource = uniqueResource('busy');
  const key = rl.keyOf(resource);
  const acquired = rl.acquire(resource, { ttl: 30_000 });
  // The attempt is written once this tick's continuations have run; block from the check phase.
  await new Promise<void>((r) => setImmediate(r));
  blockUntil((port) => cli(port, 'EXISTS', key) === '1');
  const lock = await acquired; // before the fix: NoQuorumError, every vote `timeout`
  expect(lock.votes.map((v) => v.outcome)).not.toContain('timeout');
  await lock.release();
});

it('reports a master whose PING answered while the event loop was blocked as reachable', async () => {
  const rl = engine();
  await rl.health(); // connected
  const before = suite.masters.masters.map((m) => pingCalls(m.port));
  const health = rl.health();
  await new Promise<void>((r) => setImmediate(r));
  blockUntil(
    (port) => pingCalls(port) > before[suite.masters.masters.findIndex((m) => m.port === port)],
  );
  const report = await health; // before the fix: every master `no answer within the request timeout`
  expect(report.masters.map((m) => m.reachable)).toEqual([true, true, true]);
  expect(report.available).toBe(true);
});
