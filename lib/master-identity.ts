import type { Redis, RedisOptions } from 'ioredis';
import { InvalidConfigurationError } from './core';
import type { RedlockClient } from './core';
import {
  clientShape,
  connectionOf,
  isRedlockClient,
  refusedShape,
} from './core/redis/connection/adapt';
import { normalizeRedisUrl, redactText } from './clients';
import { independenceProblems, probeMaster } from './core/redis/masters/assumptions';

/*
 * Checks that the `clients` option lists independent Redis masters, each once: Redlock's safety
 * rests on a majority of independent masters (docs/REDLOCK.md), and one server listed N times
 * makes every lock contend with itself.
 */

/** What the `clients` option accepts, for error messages. */
export const ACCEPTED_CLIENTS =
  'an ioredis or iovalkey Redis or Cluster instance, a node-redis client or Cluster client, a redis:// or rediss:// URL, or ioredis connection options';

/**
 * When `value` is a client object the engine does not take (a node-redis pool or legacy-mode
 * client, a client of another library — which would otherwise be read as ioredis connection
 * options and silently connect to localhost:6379), what it is; otherwise `undefined`. Plain
 * ioredis options never have a `sendCommand` or `connect` method.
 */
export function foreignClient(value: object): string | undefined {
  if (isRedlockClient(value)) return undefined;
  const refused = refusedShape(clientShape(value));
  if (refused) return refused;
  const v = value as { sendCommand?: unknown; connect?: unknown };
  if (typeof v.sendCommand === 'function' || typeof v.connect === 'function') {
    const name = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)
      ?.constructor?.name;
    return `a client of another library (${typeof name === 'string' && name ? `an instance of ${name}` : 'an object with connect() / sendCommand()'})`;
  }
  return undefined;
}

/**
 * The server address an entry of `clients` connects to — `host:port` (host lower-cased, port
 * 6379 when not given) or `unix:path` — or `undefined` where it cannot be told from the options
 * (Cluster instances, Sentinel set-ups, unparsable input: other checks report those).
 */
export function masterAddress(option: unknown): string | undefined {
  if (typeof option === 'string') {
    try {
      const url = new URL(normalizeRedisUrl(option));
      return `${url.hostname.toLowerCase()}:${url.port || '6379'}`;
    } catch {
      return undefined;
    }
  }
  if (option === null || typeof option !== 'object') return undefined;
  let o: RedisOptions;
  if (isRedlockClient(option)) {
    const connection = connectionOf(option);
    if (connection.cluster) return undefined;
    if (connection.library !== 'ioredis') {
      // `host:port[/db]` or `unix:path`: the server, whatever the database (as for ioredis).
      const { address } = connection;
      return address.startsWith('unix:') ? address : address.replace(/\/\d+$/, '').toLowerCase();
    }
    o = (option as Redis).options;
  } else {
    o = option as RedisOptions;
  }
  if (!o || (o as { sentinels?: unknown }).sentinels !== undefined) return undefined;
  if (typeof o.path === 'string' && o.path) return `unix:${o.path}`;
  const host = typeof o.host === 'string' && o.host ? o.host.toLowerCase() : 'localhost';
  return `${host}:${typeof o.port === 'number' ? o.port : 6379}`;
}

/**
 * Refuses two entries of `clients` with the same server address, naming both positions (the
 * same server under two names is found once connected: {@link checkIndependentMasters}).
 */
export function checkDistinctAddresses(clients: readonly unknown[]): void {
  const seen = new Map<string, number>();
  clients.forEach((option, i) => {
    const address = masterAddress(option);
    if (address === undefined) return;
    const first = seen.get(address);
    if (first !== undefined) {
      throw new InvalidConfigurationError(
        `clients[${i}]`,
        `connects to ${address} like clients[${first}]: the same master listed twice; Redlock needs independent masters, list each once`,
      );
    }
    seen.set(address, i);
  });
}

/**
 * Connected masters that are not independent (docs/REDLOCK.md): one server under different names
 * (`localhost` and `127.0.0.1`, a DNS alias, another database number — the same `run_id`), or a
 * replica of another listed master. Asks each ready standalone client `INFO server` and
 * `INFO replication` (redis/masters/assumptions.ts, bounded by `timeout` ms; masters that do not
 * answer are skipped) and returns an {@link InvalidConfigurationError} naming the positions and
 * (redacted) names, or `undefined`. What else makes a master unable to vote (a replica of an
 * unlisted master, a Sentinel, scripts refused) the engine reports itself, in its log and
 * `health()` (redis/masters/master-checks.ts): those do not fail the startup.
 */
export async function checkIndependentMasters(
  clients: readonly RedlockClient[],
  names: readonly string[],
  timeout: number,
): Promise<InvalidConfigurationError | undefined> {
  const facts = await Promise.all(
    clients.map((client) => {
      const connection = connectionOf(client);
      return !connection.isReady || connection.cluster
        ? undefined
        : probeMaster(connection, timeout, (text) => redactText(text, connection.secrets));
    }),
  );
  const addresses = clients.map((client) => connectionOf(client).address);
  const problems = [...independenceProblems(facts, names, addresses).values()];
  if (problems.length === 0) return undefined;
  return new InvalidConfigurationError(
    'clients',
    `the masters are not independent: ${problems.join('; ')}; Redlock needs independent masters: list each master once, never a replica of another`,
  );
}
