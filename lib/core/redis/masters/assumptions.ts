/**
 * What Redlock assumes of its masters (docs/REDLOCK.md: "N Redis masters ... totally
 * independent"), read from each master and judged: pure functions over what a master says about
 * itself (`INFO server`, `INFO replication`, `CONFIG GET`, one read-only script), and the probe
 * that asks it. The engine runs them after every (re)connect and now and then
 * (redis/masters/master-checks.ts); the Nest module's startup runs {@link independenceProblems}
 * too, to refuse a boot (lib/master-identity.ts). docs/operations.md, "What is checked on the
 * masters", says what each finding does.
 */
import { errorMessage } from '../../base/validate';
import type { Connection } from '../connection/connection';

/** What one master said about itself; a field is `undefined` where it could not be read. */
export interface MasterFacts {
  /** `run_id` (`INFO server`): one per server process. */
  readonly runId?: string;
  /** `redis_mode` (`INFO server`): `standalone`, `cluster` or `sentinel`. */
  readonly mode?: string;
  /** `role` (`INFO replication`): `master` or `slave`. */
  readonly role?: string;
  /** A replica's master as it was configured (`master_host`, `master_port`). */
  readonly masterHost?: string;
  readonly masterPort?: number;
  /** `master_replid` (`INFO replication`): a master's replication id, taken over by its replicas. */
  readonly replid?: string;
  /** `maxmemory` in bytes (`CONFIG GET`); `undefined` when CONFIG was refused. */
  readonly maxmemory?: number;
  /** `maxmemory-policy` (`CONFIG GET`); `undefined` when CONFIG was refused. */
  readonly policy?: string;
  /** Why CONFIG GET could not be read (an ACL without `+config|get`, a Sentinel), redacted. */
  readonly configError?: string;
  /** Why INFO could not be read, redacted. */
  readonly infoError?: string;
  /**
   * Why the master refused to run a script (NOPERM from its ACL, or no scripting at all),
   * redacted; `undefined` when it ran or failed for a passing reason (timeout, connection).
   */
  readonly scriptsRefused?: string;
}

/** What the checks conclude about one master (see {@link judgeMasters}). */
export interface MasterVerdict {
  /** Why its votes must not count; `undefined` when they may. */
  readonly unusable?: string;
  /**
   * Set when the list of masters is wrong — this master is another listed master (same server)
   * or a replica of one — : the configuration error, naming both positions.
   */
  readonly notIndependent?: string;
  /** Its `maxmemory-policy`, when it may evict lock keys ({@link evictionPolicyOf}). */
  readonly evicts?: string;
  /** What could not be checked, and why. */
  readonly unchecked: readonly string[];
}

const SENTINEL =
  'a Sentinel, not a Redis master: it keeps no keys; list Redis masters, not their Sentinels';

/** `o` without its `undefined` fields (what is not known is not there). */
export function withoutUndefined<T extends object>(o: T): T {
  for (const key of Object.keys(o) as (keyof T)[]) if (o[key] === undefined) delete o[key];
  return o;
}

/** The `key:value` lines of an `INFO` reply. */
export function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields.set(line.slice(0, colon), line.slice(colon + 1));
  }
  return fields;
}

/** The facts of the `INFO server` and `INFO replication` texts (either may be empty). */
export function infoFacts(server: string, replication: string): MasterFacts {
  const s = parseInfo(server);
  const r = parseInfo(replication);
  const port = Number(r.get('master_port'));
  return {
    runId: s.get('run_id') || undefined,
    mode: s.get('redis_mode') || undefined,
    role: r.get('role') || undefined,
    masterHost: r.get('master_host') || undefined,
    masterPort: Number.isInteger(port) && port > 0 ? port : undefined,
    replid: r.get('master_replid') || undefined,
  };
}

/**
 * The eviction policy of a master that may evict lock keys under memory pressure — a
 * `maxmemory` limit with an `allkeys-*` policy, or a `volatile-*` one (lock keys always have a
 * TTL) — or `undefined` (`noeviction`, or no limit: `maxmemory 0`).
 */
export function evictionPolicyOf(maxmemory: number, policy: string): string | undefined {
  return maxmemory > 0 && /^(allkeys|volatile)-/.test(policy) ? policy : undefined;
}

/** Whether a script's error says the master will never run the engine's scripts. */
export function refusesScripts(message: string): boolean {
  return /^NOPERM\b/.test(message) || /^ERR unknown command/i.test(message);
}

/** `host:port`, with loopback names made one (`localhost`, `::1` → `127.0.0.1`). */
function sameAddress(host: string, port: number, name: string): boolean {
  const loopback = (h: string): string =>
    /^(localhost|::1|\[::1\]|127\.\d+\.\d+\.\d+)$/i.test(h) ? '127.0.0.1' : h.toLowerCase();
  const colon = name.lastIndexOf(':');
  if (colon < 0) return false;
  return (
    Number(name.slice(colon + 1).replace(/\/\d+$/, '')) === port &&
    loopback(name.slice(0, colon)) === loopback(host)
  );
}

/**
 * Configuration errors in a list of masters: a master listed twice (two clients, or two names,
 * reaching one server: same `run_id`), and a master that is a replica of another listed one (its
 * `master_host:master_port` is that master's address, or it shares that master's replication
 * id). One entry per position found wrong, naming both; masters whose facts are unknown are skipped.
 */
export function independenceProblems(
  facts: readonly (MasterFacts | undefined)[],
  names: readonly string[],
  /** The masters' `host:port` (a client's connection address), when `names` are not. */
  addresses: readonly string[] = names,
): Map<number, string> {
  const problems = new Map<number, string>();
  const at = (i: number): string => `clients[${i}] (${names[i] ?? '?'})`;
  facts.forEach((f, j) => {
    if (!f) return;
    for (let i = 0; i < j; i++) {
      const g = facts[i];
      if (g?.runId !== undefined && g.runId === f.runId) {
        problems.set(j, `${at(i)} and ${at(j)} are one server (run_id ${f.runId})`);
        return;
      }
    }
    facts.forEach((g, i) => {
      if (!g || i === j || problems.has(j) || problems.has(i)) return;
      const replicaOf = (r: MasterFacts, m: MasterFacts, mi: number): boolean =>
        r.role === 'slave' &&
        ((r.masterHost !== undefined &&
          r.masterPort !== undefined &&
          sameAddress(r.masterHost, r.masterPort, addresses[mi] ?? '')) ||
          (r.replid !== undefined && r.replid === m.replid && m.role === 'master'));
      if (replicaOf(f, g, i)) {
        problems.set(j, `${at(j)} is a replica of ${at(i)}: one data set, not independent`);
      } else if (i < j && f.role === 'slave' && g.role === 'slave' && f.replid === g.replid) {
        if (f.replid !== undefined) {
          problems.set(j, `${at(i)} and ${at(j)} are replicas of one master: not independent`);
        }
      }
    });
  });
  return problems;
}

/**
 * What the facts of every listed master mean for each (see {@link MasterVerdict}): whether its
 * votes may count, whether the list is wrong, whether it may evict lock keys, and what could not
 * be checked. `names` are the masters' redacted names, in the order of the clients.
 */
export function judgeMasters(
  facts: readonly (MasterFacts | undefined)[],
  names: readonly string[],
): MasterVerdict[] {
  const problems = independenceProblems(facts, names);
  return facts.map((f, i): MasterVerdict => {
    if (!f) return { unchecked: [] };
    const unchecked: string[] = [];
    // (A Sentinel has no CONFIG GET, and nothing else matters about it.)
    if (f.mode === 'sentinel') return { unusable: SENTINEL, unchecked };
    if (f.infoError !== undefined) unchecked.push(`INFO refused (${f.infoError})`);
    if (f.configError !== undefined) {
      unchecked.push(`eviction policy unknown: CONFIG GET refused (${f.configError})`);
    }
    const evicts =
      f.maxmemory !== undefined && f.policy !== undefined
        ? evictionPolicyOf(f.maxmemory, f.policy)
        : undefined;
    const notIndependent = problems.get(i);
    const unusable =
      f.role === 'slave'
        ? `a read-only replica${f.masterHost !== undefined ? ` of ${f.masterHost}:${f.masterPort ?? '?'}` : ''}: it cannot take lock keys`
        : f.scriptsRefused !== undefined
          ? `it refuses the engine's scripts (${f.scriptsRefused}): give its ACL user +@scripting (EVAL, EVALSHA, SCRIPT LOAD)`
          : notIndependent;
    return withoutUndefined({ unusable, notIndependent, evicts, unchecked });
  });
}

/** How {@link probeMaster} runs a read-only script (the engine's EVALSHA with EVAL fallback). */
export type ScriptProbe = () => Promise<unknown>;

/**
 * Asks one standalone master about itself: `INFO server`, `INFO replication`, `CONFIG GET
 * maxmemory` and `maxmemory-policy`, and — with `script` — a read-only script, all sent at once.
 * Never rejects: what was refused is in the facts; `undefined` when INFO did not answer within
 * `timeout` ms (nothing is known). `redact` removes credentials from the errors it keeps.
 */
export async function probeMaster(
  connection: Connection,
  timeout: number,
  redact: (text: string) => string,
  script?: ScriptProbe,
): Promise<MasterFacts | undefined> {
  /** A command's reply, or why it failed (redacted). */
  type Answer = { readonly value: unknown } | { readonly error: string };
  const settle = (p: Promise<unknown>): Promise<Answer> =>
    p.then(
      (value) => ({ value }),
      (err: unknown) => ({ error: redact(errorMessage(err)) }),
    );
  const sent = Promise.all([
    settle(connection.info('server')),
    settle(connection.info('replication')),
    settle(connection.configGet('maxmemory')),
    settle(connection.configGet('maxmemory-policy')),
    script ? settle(script()) : Promise.resolve<Answer>({ value: undefined }),
  ]);
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<undefined>((r) => {
    timer = setTimeout(() => r(undefined), Math.max(1, timeout));
  });
  try {
    const answers = await Promise.race([sent, expired]);
    if (!answers) return undefined;
    const [server, replication, maxmemory, policy, run] = answers;
    const text = (a: Answer): string =>
      'value' in a && typeof a.value === 'string' ? a.value : '';
    const error = (...as: Answer[]): string | undefined => {
      for (const a of as) if ('error' in a) return a.error;
      return undefined;
    };
    const infoError = error(server, replication);
    const configError = error(maxmemory, policy);
    const scriptError = error(run);
    const limit = text(maxmemory);
    const evictions = text(policy);
    const known = configError === undefined && limit !== '' && evictions !== '';
    return withoutUndefined(
      Object.assign(infoFacts(text(server), text(replication)), {
        maxmemory: known ? Number(limit) : undefined,
        policy: known ? evictions : undefined,
        configError,
        infoError,
        scriptsRefused:
          scriptError !== undefined && refusesScripts(scriptError) ? scriptError : undefined,
      }),
    );
  } finally {
    clearTimeout(timer);
  }
}
