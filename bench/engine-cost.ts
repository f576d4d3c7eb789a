/**
 * Our engine's own JavaScript per acquire + release, without the network, the masters or the
 * client library: the engine (lib/core) over five in-process fake ioredis clients that answer
 * every script at once with what a master would (a grant, its fencing counter, the master's
 * clock; a release: 1). What is left is the engine's work per operation — validation, the local
 * queue, the voting rounds and their per-master plumbing, reply decoding, the clock check, the
 * lock object — measured as CPU µs per operation (`process.cpuUsage()`, user time) over many
 * operations, and optionally profiled; node-redlock 5 over the same fakes beside it. Issue 54:
 * the client's CPU per operation beyond what the guarantees' commands need
 * (bench/guarded-floor.ts) is this work, made larger by the network's (a real run interleaves
 * it with socket reads and writes and with five masters on the same cores).
 *
 *   npx ts-node --transpile-only bench/engine-cost.ts [--ops 20000] [--reps 5] [--profile out.cpuprofile] [--alloc]
 *
 * Settings: the defaults with fencing and the clock check on, the restart quarantine and the
 * wake-ups off (their extra work is on the masters and the subscriber connection, which the
 * fakes do not have). One caller on 50 reused names, then on fresh names. Prints a markdown
 * table. Not part of `npm run bench`; no Redis needed.
 */
import { EventEmitter } from 'node:events';
import { writeFileSync } from 'node:fs';
import NodeRedlock from 'redlock';
import { Redlock } from '../lib/core/redlock';
import type { RedlockClient } from '../lib/core';
import { ACQUIRE_SCRIPT } from '../lib/core/redis/kinds/mutex';
import { allocations, profiled } from './inspector';
import { formatSummary, summarizeProfile } from './profile-summary';
import { fmt, median } from './stats';

/**
 * An ioredis-shaped client whose replies come at once (a resolved promise, as a reply read from
 * the socket would): our plain lock's acquire grants (with a fencing counter and the clock when
 * asked); any other script answers 1 (our release; node-redlock's acquire and release: one key
 * set or deleted). One counter per fake master serves every fencing key: it only grows, which is
 * all the engine reads of it, and a table of counters per key would put the fake's own work
 * (thousands of keys on fresh names) into our engine's figure.
 */
class InstantMaster extends EventEmitter {
  readonly status = 'ready';
  readonly options = { host: '127.0.0.1', port: 6379 };
  private counter = 1_700_000_000_000_000;

  evalsha(sha: string, _keyCount: number, ...rest: (string | string[])[]): Promise<unknown> {
    // Our engine passes the keys and the arguments as two arrays (ioredis flattens them).
    if (sha === ACQUIRE_SCRIPT.sha)
      return Promise.resolve(this.acquire(rest[0] as string[], rest[1] as string[]));
    // Our release; node-redlock's acquire and release (one key set or deleted).
    return Promise.resolve(1);
  }

  private acquire(keys: string[], argv: string[]): unknown {
    const n = Number(argv[4]);
    const flags = argv[2];
    const reply: unknown[] = [1, -1];
    if (flags === '1' || flags === '3') {
      for (let i = 0; i < n; i++) reply.push(++this.counter);
    }
    if (flags !== '2' && flags !== '3') return reply;
    const now = Date.now();
    return [now * 1000, reply];
  }

  eval(): Promise<unknown> {
    return Promise.resolve('OK');
  }
  script(): Promise<unknown> {
    return Promise.resolve('OK');
  }
  ping(): Promise<unknown> {
    return Promise.resolve('PONG');
  }
  time(): Promise<[string, string]> {
    const now = Date.now();
    return Promise.resolve([String(Math.floor(now / 1000)), String((now % 1000) * 1000)]);
  }
  info(): Promise<string> {
    return Promise.resolve('');
  }
  config(): Promise<unknown> {
    return Promise.resolve([]);
  }
  hmget(): Promise<unknown> {
    return Promise.resolve([]);
  }
  quit(): Promise<unknown> {
    return Promise.resolve('OK');
  }
  disconnect(): void {}
}

async function main(): Promise<void> {
  const arg = (name: string): string | undefined => {
    const i = process.argv.indexOf(name);
    return i < 0 ? undefined : process.argv[i + 1];
  };
  const ops = Number(arg('--ops') ?? 20_000);
  const reps = Number(arg('--reps') ?? 5);
  const profileOut = arg('--profile');
  const clients = Array.from({ length: 5 }, () => new InstantMaster());
  const rl = new Redlock(clients as unknown as RedlockClient[], {
    quarantine: false,
    handoff: false,
    logger: { warn: () => undefined },
  });
  const nr = new NodeRedlock(clients as never, { retryCount: 0 });
  let fresh = 0;
  const loop = async (n: number, reused: boolean, nodeRedlock = false): Promise<number> => {
    const cpu = process.cpuUsage();
    for (let i = 0; i < n; i++) {
      const name = reused ? `r${i % 50}` : `f${fresh++}`;
      if (nodeRedlock) await (await nr.acquire([name], 10_000)).release();
      else await (await rl.acquire(name)).release();
    }
    return process.cpuUsage(cpu).user / n;
  };
  try {
    await loop(ops, true); // warm-up (JIT)
    await loop(ops, true, true);
    const rows: [string, boolean, boolean, number[]][] = [
      ['nestjs-redlock, 50 reused names', true, false, []],
      ['nestjs-redlock, fresh names', false, false, []],
      ['node-redlock 5, 50 reused names', true, true, []],
      ['node-redlock 5, fresh names', false, true, []],
    ];
    for (let r = 0; r < reps; r++) {
      for (const row of rows) row[3].push(await loop(ops, row[1], row[2]));
    }
    console.log(
      [
        `JavaScript per acquire + release over 5 instant fake masters (user CPU µs, median of ${reps} × ${ops.toLocaleString('en-US')} operations, interleaved):`,
        '',
        '| library, names | µs per op | spread |',
        '|---|--:|--:|',
        ...rows.map(
          ([name, , , v]) =>
            `| ${name} | ${fmt(median(v), 1)} | ${fmt(Math.min(...v), 1)}–${fmt(Math.max(...v), 1)} |`,
        ),
      ].join('\n'),
    );
    if (process.argv.includes('--alloc')) {
      const top = await allocations(() => loop(ops, true));
      const total = top.reduce((sum, [, b]) => sum + b, 0);
      console.log(`\nAllocated per operation (sampled, reused names): ${fmt(total / ops)} B`);
      for (const [where, b] of top.slice(0, 25))
        console.log(`${fmt(b / ops).padStart(6)} B  ${where}`);
      const theirs = await allocations(() => loop(ops, true, true));
      const theirTotal = theirs.reduce((sum, [, b]) => sum + b, 0);
      console.log(`\nnode-redlock 5, the same: ${fmt(theirTotal / ops)} B per operation`);
    }
    if (profileOut) {
      const { profile } = await profiled(() => loop(ops, true));
      writeFileSync(profileOut, JSON.stringify(profile));
      console.log(`\nCPU profile (reused names): ${profileOut}`);
      console.log(formatSummary(summarizeProfile(profile, ops)));
    }
  } finally {
    await rl.close();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
