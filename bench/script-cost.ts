/**
 * What each script pair costs the masters, without the network and the client: acquire + release
 * of our plain lock's scripts (lib/core/redis/kinds/mutex.ts ACQUIRE_SCRIPT, redis/scripts/release.ts
 * RELEASE_SCRIPT, built by the engine's own `MUTEX` kind, so the layout is the engine's), each
 * guarantee turned off in turn, beside the same pair with only the raw floor's commands
 * (`SET NX PX`; `GET` + `DEL`) and with the guarantees' floor's (bench/guarded-floor.ts:
 * + `TIME`, the marker `GET`, `INCR`, `PUBLISH`, nothing else). Pipelined on ONE idle master, so
 * that a difference of a microsecond shows: µs of the master's CPU (`used_cpu_user` +
 * `used_cpu_sys`) and of `EVALSHA` (`INFO commandstats`, the scripts' own commands included) per
 * pair, medians over interleaved repetitions, on fresh names (a new resource every time: a
 * counter that starts) and on 50 reused names.
 *
 *   npx ts-node --transpile-only bench/script-cost.ts [--reps 5] [--pairs 20000]
 *
 * Starts its own master on 127.0.0.1; prints a markdown table. Not part of `npm run bench`
 * (issue 54: where the masters' time goes, each guarantee apart).
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { MUTEX } from '../lib/core/redis/kinds/mutex';
import type { AcquireInput, ScriptCall } from '../lib/core/redis/kinds/kind';
import { fenceKey, lockKey, markerKey } from '../lib/core/base/keys';
import { RedisMasters } from '../test/harness/redis-masters';
import { GUARDED_ACQUIRE_LUA, GUARDED_RELEASE_LUA } from './guarded-floor';
import { RELEASE_LUA } from './raw-floor';
import { fmt, median } from './stats';

const PREFIX = 'sc:';
const MARKER = markerKey(PREFIX);
const TTL = 10_000;
const FENCE_TTL = 3_600_000;

/** One acquire + release pair for `resource` with `token`. */
type Pair = (resource: string, token: string) => [ScriptCall | Raw, ScriptCall | Raw];
/** A script of the bench's own (not the engine's): its source, keys and arguments. */
interface Raw {
  readonly lua: string;
  readonly keys: readonly string[];
  readonly args: readonly string[];
}

const BARE_ACQUIRE = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0`;

/** Our plain lock's pair, as the engine builds it (`knownMarker`: the marker value it knows). */
function ours(
  knownMarker: string,
  o: { fencing?: boolean; marker?: boolean; clock?: boolean; announce?: boolean } = {},
): Pair {
  const { fencing = true, marker = true, clock = true, announce = true } = o;
  return (resource, token) => {
    const key = lockKey(PREFIX, resource);
    const input: AcquireInput = {
      token,
      ttl: TTL,
      keys: [key],
      fenceKeys: fencing ? [fenceKey(PREFIX, resource)] : undefined,
      marker: marker ? MARKER : undefined,
      markerBirth: marker ? knownMarker : undefined,
      fenceTtl: FENCE_TTL,
      clock,
    };
    return [MUTEX.acquire(input), MUTEX.release(token, [key], announce ? 'release' : false)];
  };
}

function rows(knownMarker: string): [string, Pair][] {
  return [
    [
      'raw floor commands (SET NX PX; GET, DEL)',
      (r, t) => [
        { lua: BARE_ACQUIRE, keys: [lockKey(PREFIX, r)], args: [t, String(TTL)] },
        { lua: RELEASE_LUA, keys: [lockKey(PREFIX, r)], args: [t] },
      ],
    ],
    [
      "guarantees' floor (+ TIME, marker GET, INCR, PUBLISH)",
      (r, t) => [
        {
          lua: GUARDED_ACQUIRE_LUA,
          keys: [lockKey(PREFIX, r), fenceKey(PREFIX, r), MARKER],
          args: [t, String(TTL), String(FENCE_TTL)],
        },
        { lua: GUARDED_RELEASE_LUA, keys: [lockKey(PREFIX, r)], args: [t] },
      ],
    ],
    ['ours, defaults', ours(knownMarker)],
    ['ours, fencing off', ours(knownMarker, { fencing: false })],
    ['ours, restart quarantine off (no marker)', ours(knownMarker, { marker: false })],
    ['ours, wake-ups off (no PUBLISH)', ours(knownMarker, { announce: false })],
    ['ours, clock check off (no TIME)', ours(knownMarker, { clock: false })],
    [
      'ours, all four off',
      ours(knownMarker, { fencing: false, marker: false, clock: false, announce: false }),
    ],
  ];
}

/** The master's CPU µs (user + system) and EVALSHA µs so far. */
async function sample(c: Redis): Promise<{ cpu: number; evalsha: number }> {
  const [cpu, stats] = await Promise.all([c.info('cpu'), c.info('commandstats')]);
  const user = Number(/used_cpu_user:([\d.]+)/.exec(cpu)?.[1]);
  const sys = Number(/used_cpu_sys:([\d.]+)/.exec(cpu)?.[1]);
  const evalsha = Number(/cmdstat_evalsha:calls=\d+,usec=(\d+)/.exec(stats)?.[1] ?? 0);
  return { cpu: (user + sys) * 1e6, evalsha };
}

function source(call: ScriptCall | Raw): string {
  return 'lua' in call ? call.lua : call.script.source;
}

async function main(): Promise<void> {
  const arg = (name: string, d: number): number => {
    const i = process.argv.indexOf(name);
    return i < 0 ? d : Number(process.argv[i + 1]);
  };
  const reps = arg('--reps', 5);
  const pairs = arg('--pairs', 20_000);
  const masters = await RedisMasters.start(1);
  const [c] = masters.createClients();
  try {
    await RedisMasters.ready([c]);
    // A boot marker older than any quarantine, known to the engine (the steady state).
    const known = String(Date.now() - 3_600_000);
    await c.set(MARKER, known);
    const list = rows(known);
    const shas = new Map<string, string>();
    for (const [, pair] of list) {
      for (const call of pair('probe', 'probe')) {
        const lua = source(call);
        shas.set(lua, String(await c.script('LOAD', lua)));
      }
    }
    const out: string[] = [
      `${pairs.toLocaleString('en-US')} pairs per row and repetition, ${reps} interleaved repetitions, medians; µs per acquire + release on one master (the bench's five masters do five times this).`,
      '',
      '| script pair | fresh names: CPU µs | EVALSHA µs | 50 reused names: CPU µs | EVALSHA µs |',
      '|---|--:|--:|--:|--:|',
    ];
    const results = new Map<string, { cpu: number[]; evalsha: number[] }[]>();
    for (let rep = 0; rep < reps; rep++) {
      for (const fresh of [true, false]) {
        for (const [name, pair] of list) {
          const before = await sample(c);
          for (let i = 0; i < pairs; i += 500) {
            const p = c.pipeline();
            for (let j = i; j < Math.min(pairs, i + 500); j++) {
              const resource = fresh ? `${name.length}:${rep}:${j}` : `r${j % 50}`;
              for (const call of pair(resource, randomBytes(16).toString('base64url'))) {
                const sha = shas.get(source(call)) as string;
                p.evalsha(sha, call.keys.length, ...call.keys, ...call.args);
              }
            }
            await p.exec();
          }
          const after = await sample(c);
          const m = results.get(name) ?? [
            { cpu: [], evalsha: [] },
            { cpu: [], evalsha: [] },
          ];
          results.set(name, m);
          m[fresh ? 0 : 1].cpu.push((after.cpu - before.cpu) / pairs);
          m[fresh ? 0 : 1].evalsha.push((after.evalsha - before.evalsha) / pairs);
        }
      }
    }
    for (const [name] of list) {
      const [f, r] = results.get(name) ?? [];
      out.push(
        `| ${name} | ${fmt(median(f.cpu), 1)} | ${fmt(median(f.evalsha), 1)} | ${fmt(median(r.cpu), 1)} | ${fmt(median(r.evalsha), 1)} |`,
      );
    }
    console.log(out.join('\n'));
  } finally {
    c.disconnect();
    await masters.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
