/**
 * Probe, our engine only (not a side-by-side scenario): E child processes (4), each with its own
 * connections, one engine and C callers (1), take one resource in turns (held 1 ms) for D ms
 * (4000), retry RD ms (10), 5 masters, quarantine off, fairness across processes (PLAIN=1: the
 * default mode), after WARM ms (1000) of contending for another resource. Each engine's store is instrumented (attempts with their votes, releases,
 * announcements heard, installs); the parent merges the events on the absolute clock:
 *
 *   npx ts-node --transpile-only bench/mp-trace.ts            # summary: rates, event counts
 *   SHOW=1 npx ts-node --transpile-only bench/mp-trace.ts     # + the longest wait's events
 *   RAW=<file> PARKS=1 npx ts-node ...                        # every event as JSON, new parks too
 *   PLAIN=1 npx ts-node ...                                   # the default mode (RedisStore)
 *   QUAR=1 npx ts-node ...                                    # restart quarantine on (maxTtl = ttl)
 *   PROF=<dir> npx ts-node ...                                # a CPU profile of each child
 *   MON=<file> npx ts-node ...                                # + every master's MONITOR (below)
 *
 * Written for the fair mode (lib/core/fair/README.md): counts the
 * installs that failed (`INSTALLED none`), which the in-process probe (bench/few-callers.ts,
 * one event loop for every engine) hardly shows.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Redlock } from '../lib/core/redlock';
import { RedisMasters } from '../test/harness/redis-masters';
import { STORE_FACTORY } from '../lib/core/store';
import type { StoreFactory } from '../lib/core/store';
import type { RedlockClient } from '../lib/core/base/settings';
import { FairRedisStore } from '../lib/core/fair/fair-redis-store';
import { RedisStore } from '../lib/core/redis/store';
import { benchClients } from './clients';
import { probeSettings } from './config';

const abs = (): number => performance.timeOrigin + performance.now();
const NAMES = 'ABCDEFGH';
type Ev = { t: number; e: number; what: string };

async function child(
  e: number,
  urls: string[],
  startAt: number,
  D: number,
  C: number,
  RD: number,
): Promise<void> {
  const events: Ev[] = [];
  const grants: { e: number; asked: number; got: number; rel: number; attempts: number }[] = [];
  const who = (tok?: string): string => (tok ? tok.slice(0, 3) + ':' + tok.slice(12, 16) : '-');
  const factory = {
    [STORE_FACTORY]: true,
    masters: urls.length,
    open: (resolved: never) => {
      // PLAIN=1: the default mode's store (RedisStore); else the fair mode's.
      const st: RedisStore = process.env.PLAIN
        ? new RedisStore(clientsRef as RedlockClient[], resolved)
        : new FairRedisStore(clientsRef as RedlockClient[], resolved);
      const attempt = st.attempt.bind(st);
      st.attempt = async (req) => {
        const t0 = abs();
        const o = await attempt(req);
        // (The fair mode's fields, when there.)
        const fair = req as { handoverFrom?: unknown; defer?: unknown };
        const what = o.grant
          ? `GRANT${(o.grant as { othersWait?: boolean }).othersWait ? ' ow' : ''}`
          : `refused heldBy=${who(o.heldBy)} [${o.votes.map((v) => v.outcome[0]).join('')}]`;
        events.push({
          t: abs(),
          e,
          what: `attempt(${(abs() - t0).toFixed(1)}ms) ${what}${fair.handoverFrom ? ' handover' : ''}${fair.defer ? ' defer' : ''}`,
        });
        return o;
      };
      const rel = st.release.bind(st);
      st.release = (g, ...rest) => {
        // (The fair store's release takes more arguments: its fourth says how it ends.)
        const how = (rest as unknown[])[3];
        events.push({
          t: abs(),
          e,
          what: `release ${who(g.token)} ${how === undefined ? '' : String(how)}`,
        });
        return rel(g, ...rest);
      };
      if (!(st instanceof FairRedisStore)) {
        const wr = st.watchReleases.bind(st);
        st.watchReleases = (r, cb) =>
          wr(r, (announced, token, repeat) => {
            if (!repeat) events.push({ t: abs(), e, what: `  heard ${announced} ${who(token)}` });
            cb(announced, token, repeat);
          });
        return st;
      }
      const wr = st.watchFairReleases.bind(st);
      st.watchFairReleases = (r, cb) =>
        wr(r, (announced, token, repeat, reserved, install) => {
          if (!repeat)
            events.push({
              t: abs(),
              e,
              what: `  heard ${announced} ${who(token)} ${reserved ?? ''}${install ? ' install' : ''}`,
            });
          cb(announced, token, repeat, reserved, install);
        });
      if (process.env.RAW) {
        // Every announcement as each master sent it (RAW=1): which engine each master named.
        const n = (
          st as unknown as { notifier: { onMessage: (c: string, r: string, i: number) => void } }
        ).notifier;
        const om = n.onMessage.bind(n);
        n.onMessage = (c, raw, i) => {
          if (e === 0)
            events.push({
              t: abs(),
              e,
              what: `    m${i} ${raw}`,
            });
          om(c, raw, i);
        };
      }
      if (process.env.PARKS) {
        // PARKS=1: every new parked token (with the state of the one it replaces), abandon, fail.
        const ins = (st as unknown as { installs: Record<string, (...a: unknown[]) => unknown> })
          .installs;
        const byToken = (ins as unknown as { byToken: Map<string, { state: string }> }).byToken;
        const last = new Map<string, string>();
        const park = ins.park.bind(ins);
        ins.park = (...a: unknown[]) => {
          const r = park(...a) as { token: string };
          const prev = last.get(a[0] as string);
          if (prev !== r.token) {
            events.push({
              t: abs(),
              e,
              what: `newpark ${who(r.token)} old=${who(prev)} ${prev ? (byToken.get(prev)?.state ?? 'forgotten') : ''}`,
            });
            last.set(a[0] as string, r.token);
          }
          return r;
        };
        for (const m of ['abandon', 'fail', 'resubscribed']) {
          const f = ins[m].bind(ins);
          ins[m] = (...a: unknown[]) => {
            const x = a[0] as { token?: string } | string | number;
            events.push({
              t: abs(),
              e,
              what: `${m} ${typeof x === 'object' ? who(x.token) : String(x)}`,
            });
            return f(...a);
          };
        }
      }
      const on = st.onInstalled.bind(st);
      st.onInstalled = (h) =>
        on((res, grant) => {
          events.push({ t: abs(), e, what: `INSTALLED ${grant ? 'ok' : 'none'}` });
          h(res, grant);
        });
      return st;
    },
  } as unknown as StoreFactory;
  const clientsRef = await benchClients(urls);
  // QUAR=1: the restart quarantine on, as in the benchmark (maxTtl = ttl, as its quick mode).
  // The fair store goes with the fair waiting policy (without PLAIN=1).
  const fairness = process.env.PLAIN ? ('local' as const) : ('across-processes' as const);
  const settings = { ...probeSettings(RD), fairness };
  const engine = new Redlock(
    factory,
    process.env.QUAR ? { ...settings, quarantine: true, maxTtl: settings.ttl } : settings,
  );
  await (await engine.acquire(`warm:${Math.random()}`)).release();
  // WARM (ms, default 1000; 0: none): every engine first contends for another resource, as the
  // benchmark's warm-up round does (subscriber connections made, code paths compiled): the run
  // that counts then starts on a fresh resource with warm engines, like each benchmark round.
  const warm = Number(process.env.WARM ?? 1000);
  if (warm > 0) {
    await new Promise((r) => setTimeout(r, Math.max(0, startAt - warm - 500 - abs())));
    const warmEnd = startAt - 500;
    await Promise.all(
      Array.from({ length: C }, async () => {
        while (abs() < warmEnd) {
          const lock = await engine.acquire('mp-warm');
          await new Promise((r) => setTimeout(r, 1));
          await lock.release();
        }
      }),
    );
    events.length = 0;
  }
  await new Promise((r) => setTimeout(r, Math.max(0, startAt - abs())));
  const end = startAt + D;
  const cpu0 = process.cpuUsage();
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (abs() < end) {
        const asked = abs();
        const lock = await engine.acquire('mp-resource');
        const got = abs();
        await new Promise((r) => setTimeout(r, 1));
        const rel = abs();
        grants.push({ e, asked, got, rel, attempts: lock.attempts });
        await lock.release();
      }
    }),
  );
  const used = process.cpuUsage(cpu0);
  const cpuUs = used.user + used.system;
  await engine.close();
  clientsRef.forEach((c) => c.disconnect());
  process.stdout.write(JSON.stringify({ events, grants, cpuUs }));
}

async function main(): Promise<void> {
  if (process.env.CHILD !== undefined) {
    await child(
      Number(process.env.CHILD),
      process.env.URLS!.split(','),
      Number(process.env.START),
      Number(process.env.D),
      Number(process.env.C),
      Number(process.env.RD),
    );
    return;
  }
  const E = Number(process.env.E ?? 4),
    C = Number(process.env.C ?? 1),
    D = Number(process.env.D ?? 4000),
    RD = Number(process.env.RD ?? 10);
  const masters = await RedisMasters.start(5);
  try {
    const startAt = abs() + (process.env.QUAR ? 16_000 : 8000);
    // MON=<file>: every command each master ran on the probe's resource (MONITOR: the scripts
    // as sent, `C`, and the commands they ran, `L`), in each master's own order — which engine
    // each master's order held when a pass named one (a pass read by a descheduled master
    // before the pass it follows: lib/core/fair/README.md). Slows the masters down a little.
    const monitors = process.env.MON
      ? await Promise.all(masters.urls.map((url, i) => monitorOf(url, i)))
      : [];
    const outs = await Promise.all(
      Array.from(
        { length: E },
        (_, e) =>
          new Promise<string>((resolve) => {
            const p = spawn(
              process.execPath,
              [
                // PROF=<dir>: a CPU profile of each child (node --cpu-prof).
                ...(process.env.PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.PROF}`] : []),
                '-r',
                'ts-node/register/transpile-only',
                __filename,
              ],
              {
                env: {
                  ...process.env,
                  CHILD: String(e),
                  URLS: masters.urls.join(','),
                  START: String(startAt),
                  D: String(D),
                  C: String(C),
                  RD: String(RD),
                },
                stdio: ['ignore', 'pipe', 'inherit'],
              },
            );
            let out = '';
            p.stdout.on('data', (d) => (out += d));
            p.on('exit', () => resolve(out));
          }),
      ),
    );
    const parsed = outs.map(
      (o) =>
        JSON.parse(o) as {
          events: Ev[];
          grants: { e: number; asked: number; got: number; rel: number; attempts: number }[];
          cpuUs: number;
        },
    );
    const cpuUs = parsed.reduce((sum, p) => sum + p.cpuUs, 0);
    if (process.env.MON) {
      writeFileSync(process.env.MON, monitors.flatMap((m) => m.stop()).join('\n'));
    }
    const events = parsed.flatMap((p) => p.events).sort((a, b) => a.t - b.t);
    const grants = parsed.flatMap((p) => p.grants).sort((a, b) => a.got - b.got);
    const waits = grants.map((g) => g.got - g.asked).sort((a, b) => a - b);
    const mean = waits.reduce((s, w) => s + w, 0) / waits.length;
    const attempts = events.filter((x) => x.what.startsWith('attempt')).length;
    if (grants.length === 0) {
      console.log(`E=${E} C=${C} RD=${RD} no lock granted (${attempts} attempts)`);
    } else
      console.log(
        `E=${E} C=${C} RD=${RD} locks/s=${(grants.length / (D / 1000)).toFixed(0)} mean=${mean.toFixed(1)} p99=${waits[Math.floor(waits.length * 0.99)].toFixed(1)} max=${waits[waits.length - 1].toFixed(0)} attempts/lock=${(attempts / grants.length).toFixed(2)} installs=${events.filter((x) => x.what === 'INSTALLED ok').length} failedInstalls=${events.filter((x) => x.what === 'INSTALLED none').length} splitVotes=${events.filter((x) => /refused.*\[[^\]]*o/.test(x.what)).length} clientCpuUs/lock=${(cpuUs / grants.length).toFixed(0)}`,
      );
    const kinds = new Map<string, number>();
    for (const x of events) {
      const k = x.what
        .replace(/\(.*?\)/, '')
        .replace(/heldBy=\S+/, 'heldBy')
        .replace(/\[.*\]/, '')
        .replace(/ \S+:\S{4}/g, '')
        .trim();
      kinds.set(k, (kinds.get(k) ?? 0) + 1);
    }
    console.log(
      [...kinds]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 16)
        .map(([k, v]) => `${v} ${k}`)
        .join('\n'),
    );
    if (process.env.RAW) {
      // RAW=<file>: every event (and grant) as JSON, for analysis.
      writeFileSync(process.env.RAW, JSON.stringify({ events, grants }));
    }
    const t0 = grants[0].asked;
    const worst = [...grants]
      .filter((g) => g.asked > t0 + 1000)
      .sort((a, b) => b.got - b.asked - (a.got - a.asked))[0];
    if (worst && process.env.SHOW) {
      console.log(
        `WORST ${NAMES[worst.e]} ${(worst.got - worst.asked).toFixed(1)} ms attempts ${worst.attempts}`,
      );
      for (const x of events.filter((x) => x.t >= worst.asked - 2 && x.t <= worst.got))
        console.log(`  ${(x.t - t0).toFixed(2)} ${NAMES[x.e]} ${x.what}`);
    }
  } finally {
    await masters.stop();
  }
}

/** MONITOR of master `i` at `url`, lines on the probe's resource, until `stop()`. */
async function monitorOf(url: string, i: number): Promise<{ stop: () => string[] }> {
  const lines: string[] = [];
  const client = (await benchClients([url]))[0];
  const monitor = await client.monitor();
  monitor.on('monitor', (time: string, args: string[], source: string) => {
    if (args.some((a) => String(a).includes('mp-resource'))) {
      lines.push(`${time} m${i} ${source === 'lua' ? 'L' : 'C'} ${args.join(' ')}`);
    }
  });
  return {
    stop: () => {
      monitor.disconnect();
      client.disconnect();
      return lines;
    },
  };
}

void main();
