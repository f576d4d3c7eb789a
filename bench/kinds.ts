/**
 * What shared locks and semaphores cost next to a mutex, on our engine with the same settings
 * (the bench defaults: fencing, restart quarantine and hand-off on): acquire + release of a
 * distinct resource, one caller, then 16 callers. Per op: wall-clock µs, Node CPU µs, Redis
 * commands and Redis command µs over all masters (`INFO commandstats`). Then the semaphore's
 * grant rate under per-link latency skew next to a plain pigeonhole semaphore (bench/kinds-skew.ts).
 *
 *   npx ts-node --transpile-only bench/kinds.ts [--quick] [--masters 5] [--skew-only]
 *
 * Starts its own masters on 127.0.0.1; prints a markdown table. Not part of `npm run bench`.
 */
import type { Redis } from 'ioredis';
import { Redlock } from '../lib/core/redlock';
import type { AcquireOptions } from '../lib/core/base/types';
import { RedisMasters } from '../test/harness/redis-masters';
import { BENCH_SETTINGS, quickFromEnv } from './config';
import { fmt } from './stats';
import { semaphoreUnderSkew, skewTable } from './kinds-skew';

interface Row {
  kind: string;
  wallUsSeq: number;
  nodeUsSeq: number;
  callsSeq: number;
  redisUsSeq: number;
  wallUsPar: number;
}

async function commandStats(clients: Redis[]): Promise<{ calls: number; usec: number }> {
  let calls = 0;
  let usec = 0;
  for (const c of clients) {
    const info = await c.info('commandstats');
    for (const m of info.matchAll(/cmdstat_(\S+?):calls=(\d+),usec=(\d+)/g)) {
      if (m[1] === 'info') continue;
      calls += Number(m[2]);
      usec += Number(m[3]);
    }
  }
  return { calls, usec };
}

async function measure(
  rl: Redlock,
  clients: Redis[],
  kind: string,
  options: AcquireOptions,
  ops: number,
): Promise<Row> {
  const once = async (i: number): Promise<void> => {
    const lock = await rl.acquire(`bench-kinds:${kind}:${i}`, options);
    await lock.release();
  };
  for (let i = 0; i < 200; i++) await once(-1 - i); // warm-up (scripts loaded, JIT)
  const before = await commandStats(clients);
  const cpu = process.cpuUsage();
  let t = performance.now();
  for (let i = 0; i < ops; i++) await once(i);
  const wallSeq = performance.now() - t;
  const used = process.cpuUsage(cpu);
  const after = await commandStats(clients);
  t = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < ops) await once(ops + next++);
    }),
  );
  const wallPar = performance.now() - t;
  return {
    kind,
    wallUsSeq: (wallSeq * 1000) / ops,
    nodeUsSeq: (used.user + used.system) / ops,
    callsSeq: (after.calls - before.calls) / ops,
    redisUsSeq: (after.usec - before.usec) / ops,
    wallUsPar: (wallPar * 1000) / ops,
  };
}

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick') || quickFromEnv();
  const at = process.argv.indexOf('--masters');
  const n = at > 0 ? Number(process.argv[at + 1]) : 5;
  const ops = quick ? 300 : 3000;
  const skewMs = quick ? 3000 : 15_000;
  const masters = await RedisMasters.start(n);
  const clients = masters.createClients();
  try {
    await RedisMasters.ready(clients);
    if (process.argv.includes('--skew-only')) {
      const ports = masters.masters.map((m) => m.port);
      process.stdout.write(skewTable(await semaphoreUnderSkew(ports, skewMs), skewMs, n));
      return;
    }
    const rl = new Redlock(clients, {
      ttl: BENCH_SETTINGS.ttl,
      // fresh masters: nothing can predate them, wait out no quarantine
      quarantine: { duration: 0 },
      logger: { warn: () => undefined },
    });
    const rows: Row[] = [];
    for (const [kind, options] of [
      ['mutex', {}],
      ['shared', { shared: true }],
      ['semaphore (limit 3)', { limit: 3 }],
    ] as const) {
      rows.push(await measure(rl, clients, kind, options, ops));
    }
    await rl.close();
    const base = rows[0];
    process.stdout.write(
      [
        `\n${quick ? '**QUICK MODE — not representative.** ' : ''}${n} masters, ${ops} ops per kind, acquire + release of a distinct resource.\n`,
        '| kind | µs/op (1 caller) | vs mutex | Node CPU µs/op | Redis commands/op | Redis µs/op | µs/op (16 callers) |',
        '| --- | --- | --- | --- | --- | --- | --- |',
        ...rows.map(
          (r) =>
            `| ${r.kind} | ${fmt(r.wallUsSeq)} | ${fmt(r.wallUsSeq / base.wallUsSeq, 2)}× | ${fmt(r.nodeUsSeq)} | ${fmt(r.callsSeq, 1)} | ${fmt(r.redisUsSeq, 1)} | ${fmt(r.wallUsPar)} |`,
        ),
        '',
      ].join('\n'),
    );
    const ports = masters.masters.map((m) => m.port);
    process.stdout.write(skewTable(await semaphoreUnderSkew(ports, skewMs), skewMs, n));
  } finally {
    await masters.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
