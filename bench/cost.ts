/**
 * Per-operation cost breakdown: a fixed number of acquire + release operations per library
 * (one caller, then `parallel` callers), each on a distinct resource, with
 *
 * - µs of JavaScript per op in this Node process: `process.cpuUsage()` delta (user + system),
 * - µs on the masters per op: `INFO commandstats` usec delta summed over every command and master,
 *   and the commands per op,
 * - what each distinct resource leaves behind on each master: `DBSIZE` and `INFO memory`
 *   used_memory deltas after the sequential phase, and the remaining TTL of one such key.
 *
 * Plus the keyspace footprint of a whole run (keys per library prefix on each master).
 */
import type { Redis } from 'ioredis';
import type { Contender } from './contenders';
import type { Footprint } from './report';
import { sleep } from './stats';

export type { Footprint } from './report';

/** Cost figures of one library in one round. */
export interface CostResult {
  [metric: string]: number;
  /** Node CPU µs per op, one caller. */
  nodeUsSeq: number;
  /** Node CPU µs per op, `parallel` callers. */
  nodeUsPar: number;
  /** Redis command time (commandstats usec, all masters) µs per op, one caller. */
  redisUsSeq: number;
  redisUsPar: number;
  /** Redis commands per op, all masters, one caller. */
  callsSeq: number;
  /** Keys left per distinct resource on each master (mean over masters). */
  keysPerResource: number;
  /** used_memory growth per distinct resource on each master, bytes (mean over masters). */
  bytesPerResource: number;
  /** Remaining TTL (s) of one key left behind, -1 when none has a TTL, NaN when none is left. */
  leftTtlSec: number;
}

interface ServerSample {
  usec: number;
  calls: number;
  perCommand: Map<string, number>;
  keys: number;
  memory: number;
}

async function sample(clients: Redis[]): Promise<ServerSample> {
  const s: ServerSample = { usec: 0, calls: 0, perCommand: new Map(), keys: 0, memory: 0 };
  for (const c of clients) {
    const [stats, mem, keys] = await Promise.all([
      c.info('commandstats'),
      c.info('memory'),
      c.dbsize(),
    ]);
    for (const m of stats.matchAll(/cmdstat_(\S+?):calls=(\d+),usec=(\d+)/g)) {
      if (m[1] === 'info' || m[1] === 'dbsize' || m[1].startsWith('config') || m[1] === 'scan')
        continue;
      s.usec += Number(m[3]);
      s.calls += Number(m[2]);
      s.perCommand.set(m[1], (s.perCommand.get(m[1]) ?? 0) + Number(m[2]));
    }
    s.memory += Number(/used_memory:(\d+)/.exec(mem)?.[1] ?? NaN);
    s.keys += keys;
  }
  return s;
}

async function ops(c: Contender, tag: string, count: number, callers: number): Promise<number> {
  let next = 0;
  const cpu0 = process.cpuUsage();
  const worker = async (): Promise<void> => {
    while (next < count) {
      const held = await c.lock(`${tag}:${next++}`);
      await held.release();
    }
  };
  await Promise.all(Array.from({ length: callers }, () => worker()));
  const d = process.cpuUsage(cpu0);
  return (d.user + d.system) / count;
}

/** One library's cost figures: `count` sequential ops, then `count` ops over `parallel` callers. */
export async function costOf(
  c: Contender,
  clients: Redis[],
  tag: string,
  count: number,
  parallel: number,
): Promise<{ result: CostResult; commands: Record<string, number> }> {
  const n = clients.length;
  // Let releases that resolved at a majority land on the remaining masters before sampling.
  const settle = (): Promise<void> => sleep(100);
  const s0 = await sample(clients);
  const nodeUsSeq = await ops(c, `${tag}:s`, count, 1);
  await settle();
  const s1 = await sample(clients);
  const nodeUsPar = await ops(c, `${tag}:p`, count, parallel);
  await settle();
  const s2 = await sample(clients);
  let leftTtlSec = NaN;
  let cursor = '0';
  do {
    const [next, found] = await clients[0].scan(cursor, 'MATCH', `*${tag}:s:*`, 'COUNT', 10_000);
    cursor = next;
    if (found.length) {
      leftTtlSec = await clients[0].ttl(found[0]);
      break;
    }
  } while (cursor !== '0');
  const commands: Record<string, number> = {};
  for (const [name, calls] of s1.perCommand) {
    const per = (calls - (s0.perCommand.get(name) ?? 0)) / count;
    if (per > 0.005) commands[name] = per;
  }
  return {
    result: {
      nodeUsSeq,
      nodeUsPar,
      redisUsSeq: (s1.usec - s0.usec) / count,
      redisUsPar: (s2.usec - s1.usec) / count,
      callsSeq: (s1.calls - s0.calls) / count,
      keysPerResource: (s1.keys - s0.keys) / n / count,
      bytesPerResource: (s1.memory - s0.memory) / n / count,
      leftTtlSec,
    },
    commands,
  };
}

/** Counts every key on each master by prefix (SCAN; run once at the end). */
export async function footprint(clients: Redis[]): Promise<Footprint[]> {
  const out: Footprint[] = [];
  for (let i = 0; i < clients.length; i++) {
    const c = clients[i];
    const byPrefix: Record<string, number> = {};
    let cursor = '0';
    do {
      const [next, keys] = await c.scan(cursor, 'COUNT', 5000);
      cursor = next;
      for (const k of keys) {
        const m = /^(bench:[^:{]+:|lock:)(fence:)?/.exec(k);
        const p = m ? m[1] + (m[2] ?? '') : k.includes('boot') ? 'boot markers' : 'other';
        byPrefix[p] = (byPrefix[p] ?? 0) + 1;
      }
    } while (cursor !== '0');
    const mem = await c.info('memory');
    out.push({
      master: i,
      keys: await c.dbsize(),
      usedMemoryMB: Number(/used_memory:(\d+)/.exec(mem)?.[1] ?? NaN) / 2 ** 20,
      byPrefix,
    });
  }
  return out;
}
