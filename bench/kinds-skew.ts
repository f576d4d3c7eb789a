/**
 * The counting semaphore under uneven per-link latency (bench/kinds.ts, second table): 8
 * contenders, each with its own connections to every master through its own TCP delay proxy per
 * link (a fixed 0–15 ms one way, test/harness/skewed-links.ts); `limit: 2`, ttl 2 s, holds of
 * 5–40 ms; requestTimeout 150, retryCount 4, retryDelay 15 ± 10, waitTimeout 200.
 *
 * Two rows on the same links: our engine's semaphore (defaults: fencing, restart quarantine,
 * hand-off), and a plain pigeonhole semaphore written here — the same Lua and the same quorum
 * q(N, n) = floor(N·n/(n+1)) + 1, each attempt one parallel round on every master, refused
 * attempts undone where they were admitted and retried after retryDelay ± retryJitter until the
 * wait ends; no local queue, no announcements, no fencing. Grants per second, acquire p50 of the
 * grants, and the errors by code (a refusal of the plain one is not an error).
 * `SKEW_FENCING=0` turns our row's fencing off (what the fencing raise costs under skew).
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { lockKey } from '../lib/core/base/keys';
import { HOLDERS_RELEASE_SCRIPT } from '../lib/core/redis/kinds/holder-scripts';
import { semaphoreQuorum } from '../lib/core/quorum/kind-rules';
import { SEMAPHORE_ACQUIRE_SCRIPT } from '../lib/core/redis/kinds/semaphore-scripts';
import { RedlockError } from '../lib/core/base/errors';
import { Redlock } from '../lib/core/redlock';
import { definedScripts, evalScript } from '../lib/core/redis/scripts/lua';
import { connectionOf } from '../lib/core/redis/connection/adapt';
import { skewedLinks, mostAtOnce } from '../test/harness/skewed-links';
import { fmt, sleep } from './stats';

const CONTENDERS = 8;
const LIMIT = 2;
const TTL = 2000;
const REQUEST_TIMEOUT = 150;
const RETRY_COUNT = 4;
const RETRY_DELAY = 15;
const RETRY_JITTER = 10;
const WAIT_TIMEOUT = 200;

/** One row of the skew table. */
export interface SkewRow {
  readonly name: string;
  readonly grants: number;
  readonly perSecond: number;
  readonly p50: number;
  readonly mostAtOnce: number;
  readonly errors: ReadonlyMap<string, number>;
  /** Script calls (EVALSHA, EVAL) on all masters per grant: attempts, clean-ups, releases. */
  readonly scriptsPerGrant: number;
  /** Node CPU of the bench process (contenders and delay proxies) over the row, % of one core. */
  readonly cpu: number;
  /** Our row: script calls sent per grant, by script (counted on the contenders' clients). */
  readonly byScript?: ReadonlyMap<string, number>;
}

/**
 * Counts the script calls that `clients` send, by script name, until the returned function is
 * called (it restores the clients and returns the counts).
 */
function countScripts(clients: readonly Redis[]): () => Map<string, number> {
  const names = new Map(definedScripts().map((s) => [s.sha, s.name]));
  const sources = new Map(definedScripts().map((s) => [s.source, s.name]));
  const counts = new Map<string, number>();
  const add = (name: string): void => void counts.set(name, (counts.get(name) ?? 0) + 1);
  const restore = clients.map((c) => {
    const { evalsha, eval: evalFn } = c;
    type Call = (...a: unknown[]) => unknown;
    const patched = c as unknown as { evalsha: Call; eval: Call };
    patched.evalsha = (...a: unknown[]) => {
      add(names.get(String(a[0])) ?? 'other');
      return (evalsha as unknown as Call).apply(c, a);
    };
    patched.eval = (...a: unknown[]) => {
      add(`${sources.get(String(a[0])) ?? 'other'} (EVAL)`);
      return (evalFn as unknown as Call).apply(c, a);
    };
    return () => {
      patched.evalsha = evalsha as unknown as Call;
      patched.eval = evalFn as unknown as Call;
    };
  });
  return () => {
    for (const r of restore) r();
    return counts;
  };
}

async function scriptCalls(clients: readonly Redis[]): Promise<number> {
  let calls = 0;
  for (const c of clients) {
    const info = await c.info('commandstats');
    for (const m of info.matchAll(/cmdstat_(evalsha|eval):calls=(\d+)/g)) calls += Number(m[2]);
  }
  return calls;
}

/** One contender's acquire: a release function when granted, `undefined` when refused. */
type Acquire = (resource: string) => Promise<(() => Promise<void>) | undefined>;

async function drive(
  name: string,
  acquirers: readonly Acquire[],
  ms: number,
  masters: readonly Redis[],
): Promise<SkewRow> {
  const before = await scriptCalls(masters);
  const cpu = process.cpuUsage();
  const resource = `bench-kinds-skew:${name}:${randomBytes(4).toString('hex')}`;
  const held: { from: number; to: number }[] = [];
  const took: number[] = [];
  const errors = new Map<string, number>();
  const end = performance.now() + ms;
  await Promise.all(
    acquirers.map(async (acquire) => {
      while (performance.now() < end) {
        const t = performance.now();
        try {
          const release = await acquire(resource);
          if (!release) continue;
          const from = performance.now();
          took.push(from - t);
          await sleep(5 + Math.random() * 35);
          held.push({ from, to: performance.now() });
          await release();
        } catch (err) {
          const code = err instanceof RedlockError ? err.code : 'OTHER';
          if (code !== 'LOCK_CONTENDED' && code !== 'WAIT_TIMEOUT') {
            errors.set(code, (errors.get(code) ?? 0) + 1);
          }
        }
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  took.sort((a, b) => a - b);
  const scripts = (await scriptCalls(masters)) - before;
  return {
    scriptsPerGrant: scripts / Math.max(1, held.length),
    cpu: (used.user + used.system) / 10 / ms,
    name,
    grants: held.length,
    perSecond: (held.length * 1000) / ms,
    p50: took.length ? took[Math.floor(took.length / 2)] : NaN,
    mostAtOnce: mostAtOnce(held),
    errors,
  };
}

/** The plain pigeonhole semaphore on one contender's clients (see the file comment). */
function plainSemaphore(clients: readonly Redis[]): Acquire {
  const q = semaphoreQuorum(clients.length, LIMIT);
  const attempt = async (key: string, token: string): Promise<boolean> => {
    const args = [token, String(TTL), '0', '0', '1', '0', String(LIMIT)];
    const start = performance.now();
    const replies = await Promise.all(
      clients.map((c) =>
        Promise.race([
          evalScript(connectionOf(c), SEMAPHORE_ACQUIRE_SCRIPT, [key], args).catch(() => undefined),
          sleep(REQUEST_TIMEOUT).then(() => undefined),
        ]),
      ),
    );
    const admitted = replies.filter((r) => Array.isArray(r) && r[0] === 1).length;
    const validity = TTL - (performance.now() - start) - (Math.floor(TTL * 0.01) + 2);
    if (admitted >= q && validity > 0) return true;
    await release(key, token);
    return false;
  };
  const release = async (key: string, token: string): Promise<void> => {
    await Promise.all(
      clients.map((c) =>
        evalScript(connectionOf(c), HOLDERS_RELEASE_SCRIPT, [key], [token, '0']).catch(
          () => undefined,
        ),
      ),
    );
  };
  return async (resource) => {
    const key = lockKey('bench:', resource);
    const deadline = performance.now() + WAIT_TIMEOUT;
    for (let i = 0; i <= RETRY_COUNT; i++) {
      const token = randomBytes(15).toString('base64url');
      if (await attempt(key, token)) return () => release(key, token);
      const wait = RETRY_DELAY + (Math.random() * 2 - 1) * RETRY_JITTER;
      if (performance.now() + wait >= deadline) return undefined;
      await sleep(wait);
    }
    return undefined;
  };
}

/** Runs both rows for `ms` each on the masters at `ports`. */
export async function semaphoreUnderSkew(ports: readonly number[], ms: number): Promise<SkewRow[]> {
  const links = await skewedLinks(ports, CONTENDERS, 15);
  const engines = links.contenders.map(
    (c) =>
      new Redlock([...c.clients], {
        quarantine: { duration: 0 }, // fresh masters: nothing can predate them
        fencing: process.env.SKEW_FENCING !== '0',
        requestTimeout: REQUEST_TIMEOUT,
        retryCount: RETRY_COUNT,
        retryDelay: RETRY_DELAY,
        retryJitter: RETRY_JITTER,
        logger: { warn: () => undefined },
      }),
  );
  try {
    const stop = countScripts(links.contenders.flatMap((c) => c.clients));
    const measured = await drive(
      'semaphore (ours)',
      engines.map((rl) => async (resource: string) => {
        const lock = await rl.acquire(resource, {
          limit: LIMIT,
          ttl: TTL,
          waitTimeout: WAIT_TIMEOUT,
        });
        return () => lock.release().then(() => undefined);
      }),
      ms,
      links.contenders[0].clients,
    );
    const counted = stop();
    const perGrant = new Map(
      [...counted].map(([name, n]) => [name, n / Math.max(1, measured.grants)] as const),
    );
    const ours: SkewRow = Object.assign({}, measured, { byScript: perGrant });
    const plain = await drive(
      'plain pigeonhole semaphore',
      links.contenders.map((c) => plainSemaphore(c.clients)),
      ms,
      links.contenders[0].clients,
    );
    return [ours, plain];
  } finally {
    await Promise.all(engines.map((e) => e.close()));
    await links.close();
  }
}

/** The markdown table of {@link semaphoreUnderSkew}. */
export function skewTable(rows: readonly SkewRow[], ms: number, masters: number): string {
  const plain = rows[rows.length - 1];
  return [
    `\nSemaphore under latency skew: ${masters} masters, ${CONTENDERS} contenders (0–15 ms one way per link), limit ${LIMIT}, holds 5–40 ms, waitTimeout ${WAIT_TIMEOUT} ms, ${fmt(ms / 1000, 0)} s per row.\n`,
    '| semaphore | grants/s | vs plain | acquire p50 ms | scripts/grant | Node CPU % | most at once | errors (not contention) |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows.map(
      (r) =>
        `| ${r.name} | ${fmt(r.perSecond, 1)} | ${fmt(r.perSecond / plain.perSecond, 2)}× | ${fmt(r.p50, 1)} | ${fmt(r.scriptsPerGrant, 1)} | ${fmt(r.cpu)} | ${r.mostAtOnce} | ${
          r.errors.size ? [...r.errors].map(([k, v]) => `${k} ${v}`).join(', ') : '0'
        } |`,
    ),
    '',
    ...rows
      .filter((r) => r.byScript)
      .map(
        (r) =>
          `${r.name}, script calls sent per grant: ${[...(r.byScript ?? [])]
            .sort((a, b) => b[1] - a[1])
            .map(([name, n]) => `${name} ${fmt(n, 1)}`)
            .join(', ')}`,
      ),
    '',
  ].join('\n');
}
