import Redis from 'ioredis';
import type { RedisOptions } from 'ioredis';
import type { RedlockClient } from './core';
import { errorMessage } from './core/base/validate';
import { connectionOf, isRedlockClient } from './core/redis/connection/adapt';
import {
  clientSecrets,
  redactText as redactWith,
  redactUrl as redactUrlCore,
  urlSecrets,
} from './core/base/redact';
import { masterErrorMessage, masterReadyMessage } from './redlock.messages';
import type { RedlockClientOption } from './interfaces';

/** Where client events are reported. */
export interface ClientLogger {
  /** Operator-relevant events (a master down, back up). */
  warn(message: string): void;
  /** Informational events. */
  log(message: string): void;
}

/** The clients of one module instance. */
export interface RedlockClients {
  /** One client per master, in the order of the `clients` option. */
  readonly clients: readonly RedlockClient[];
  /** Redacted names, parallel to {@link clients}. */
  readonly names: readonly string[];
  /** The clients created by the module (closed on shutdown); user instances are not here. */
  readonly owned: readonly RedlockClient[];
  /** Passwords found in the options (URLs, option objects, instances): scrubbed from every log line. */
  readonly secrets: readonly string[];
  /** Detaches the module's listeners and closes the owned clients. Idempotent. */
  close(): Promise<void>;
}

/** Minimum interval, in ms, between two error log lines of the same master. */
export const ERROR_LOG_INTERVAL = 30_000;

/**
 * Replaces the password of a URL with `***`, keeping the user name:
 * `redis://user:secret@host:6379` → `redis://user:***@host:6379`. Works on malformed URLs and on
 * any password (`#`, `/`, `?`, `@`, `:`, spaces, unicode): everything between `//` and the last
 * `@` is treated as credentials; secret query parameters (`?password=`) are redacted too.
 */
export function redactUrl(url: string): string {
  return redactUrlCore(url);
}

/**
 * Strips credentials from every URL found in a free text (error messages), and every literal
 * occurrence of the given known `secrets` (passwords of the configured masters).
 */
export function redactText(text: string, secrets: readonly string[] = []): string {
  return redactWith(text, secrets);
}

const SCHEME = /^(rediss?:)\/\//i;

/** A `redis://` URL's user info, by position: everything between `//` and the last `@`. */
function userInfoOf(url: string): string | undefined {
  const scheme = SCHEME.exec(url);
  if (!scheme) return undefined;
  const rest = url.slice(scheme[0].length);
  const at = rest.lastIndexOf('@');
  return at < 0 ? undefined : rest.slice(0, at);
}

/**
 * The user name and password of a `redis://` URL, read by position — everything between `//`
 * and the last `@` is the user info, split at its first `:` — and percent-decoded when they are
 * validly encoded. `undefined` when the URL has no user info.
 */
export function urlCredentials(url: string): { username: string; password: string } | undefined {
  const userinfo = userInfoOf(url);
  if (userinfo === undefined) return undefined;
  const colon = userinfo.indexOf(':');
  const decode = (v: string): string => {
    try {
      return decodeURIComponent(v);
    } catch {
      return v; // a raw '%' that is not an escape: taken literally
    }
  };
  return colon < 0
    ? { username: decode(userinfo), password: '' }
    : { username: decode(userinfo.slice(0, colon)), password: decode(userinfo.slice(colon + 1)) };
}

/** Characters that end a URL's user info where a URL parser reads it (RFC 3986, WHATWG URL). */
const USERINFO_ENDS = ['/', '?', '#'] as const;

/** How each of {@link USERINFO_ENDS} is written inside a user name or password. */
const ENCODED: Readonly<Record<(typeof USERINFO_ENDS)[number], string>> = {
  '/': '%2F',
  '?': '%3F',
  '#': '%23',
};

/**
 * What is wrong with a `redis://` URL whose user name or password holds an unencoded `/`, `?` or
 * `#`, or `undefined` when nothing is. A URL parser ends the user info at the first of them, so
 * such a URL does not mean what it says: `redis://user:SEC#RET@host:6379` is the host `user`
 * with the rest as a fragment (or a port, or a path), and no two clients agree on what to do with
 * it. The text names the character and the part (user name or password), never their content.
 * The user info is, as in {@link urlCredentials}, everything between `//` and the last `@`.
 */
export function urlUserInfoProblem(url: string): string | undefined {
  const userinfo = userInfoOf(url);
  if (userinfo === undefined) return undefined;
  let first = -1;
  for (const c of USERINFO_ENDS) {
    const i = userinfo.indexOf(c);
    if (i >= 0 && (first < 0 || i < first)) first = i;
  }
  if (first < 0) return undefined;
  const char = userinfo[first] as (typeof USERINFO_ENDS)[number];
  const colon = userinfo.indexOf(':');
  const part = colon >= 0 && first > colon ? 'password' : 'user name';
  return (
    `the ${part} of the URL ${redactUrl(url)} holds an unencoded "${char}", where a URL ends ` +
    `its user info: the URL does not mean what it says (another host, port or path). ` +
    `Percent-encode the ${part} (encodeURIComponent: "${char}" is ${ENCODED[char]})`
  );
}

/**
 * A `redis://` URL whose user info is percent-encoded, so that a password holding `#`, `/`, `?`,
 * `@`, `:`, spaces or non-ASCII characters reaches the server as written instead of being cut by
 * the URL parser (which would turn part of it into a host, port or path — and into error
 * messages). URLs without user info are returned unchanged.
 */
export function normalizeRedisUrl(url: string): string {
  const creds = urlCredentials(url);
  if (!creds) return url;
  const scheme = SCHEME.exec(url) as RegExpExecArray;
  const rest = url.slice(scheme[0].length);
  const host = rest.slice(rest.lastIndexOf('@') + 1);
  const user = encodeURIComponent(creds.username);
  const info =
    creds.password === '' && !rest.slice(0, rest.lastIndexOf('@')).includes(':')
      ? user
      : `${user}:${encodeURIComponent(creds.password)}`;
  return `${scheme[0]}${info}@${host}`;
}

/** Passwords contained in one entry of the `clients` option. */
export function optionSecrets(option: RedlockClientOption | RedlockClient): string[] {
  if (typeof option === 'string') return urlSecrets(option);
  if (isRedlockClient(option)) return [...connectionOf(option).secrets];
  return clientSecrets({ options: option });
}

/** Redacted display name of one entry of the `clients` option. */
export function clientName(option: RedlockClientOption | RedlockClient): string {
  if (typeof option === 'string') return redactUrl(option);
  if (isRedlockClient(option)) {
    const connection = connectionOf(option);
    if (connection.cluster) return 'cluster';
    if (connection.library !== 'ioredis') {
      return connection.address.startsWith('unix:')
        ? connection.address
        : `redis://${connection.address}`;
    }
    return optionsName((option as Redis).options);
  }
  return optionsName(option as RedisOptions);
}

function optionsName(o: RedisOptions): string {
  if (o.path) return `unix:${o.path}`;
  const scheme = o.tls ? 'rediss' : 'redis';
  const user = o.username ? `${o.username}:***@` : o.password ? ':***@' : '';
  return `${scheme}://${user}${o.host ?? 'localhost'}:${o.port ?? 6379}${o.db ? `/${o.db}` : ''}`;
}

/**
 * Turns the `clients` option into ioredis clients. URLs and option objects become new clients
 * with `defaults` (lock-friendly settings) under the caller's own options; instances are used as
 * they are and never closed. Created clients get an `error` listener that logs (redacted,
 * at most once per {@link ERROR_LOG_INTERVAL} per master) instead of crashing the process.
 */
export function createClients(
  options: readonly RedlockClientOption[],
  defaults: Readonly<RedisOptions>,
  logger: ClientLogger,
): RedlockClients {
  const clients: RedlockClient[] = [];
  const names: string[] = [];
  const secrets = options.flatMap((o) => optionSecrets(o));
  const owned: { client: Redis; detach: () => void }[] = [];
  for (const option of options) {
    const name = clientName(option);
    names.push(name);
    if (isRedlockClient(option)) {
      clients.push(option);
      continue;
    }
    const client =
      typeof option === 'string'
        ? new Redis(normalizeRedisUrl(option), { ...defaults })
        : new Redis({ ...defaults, ...(option as RedisOptions) });
    owned.push({ client, detach: watch(client, name, logger, secrets) });
    clients.push(client);
  }
  let closing: Promise<void> | undefined;
  return {
    clients,
    names,
    secrets,
    owned: owned.map((o) => o.client),
    close: () =>
      (closing ??= Promise.all(
        owned.map(async ({ client, detach }) => {
          await closeClient(client);
          detach();
        }),
      ).then(() => undefined)),
  };
}

function watch(
  client: Redis,
  name: string,
  logger: ClientLogger,
  secrets: readonly string[],
): () => void {
  let lastLog = -Infinity;
  let suppressed = 0;
  let failing = false;
  const onError = (err: unknown): void => {
    failing = true;
    const now = Date.now();
    if (now - lastLog < ERROR_LOG_INTERVAL) {
      suppressed++;
      return;
    }
    lastLog = now;
    logger.warn(masterErrorMessage(name, redactText(errorMessage(err), secrets), suppressed));
    suppressed = 0;
  };
  const onReady = (): void => {
    if (!failing) return;
    failing = false;
    lastLog = -Infinity;
    suppressed = 0;
    logger.log(masterReadyMessage(name));
  };
  client.on('error', onError);
  client.on('ready', onReady);
  return () => {
    client.off('ready', onReady);
    // Keep swallowing errors: a late socket error after close must not crash the process.
    client.off('error', onError);
    client.on('error', () => undefined);
  };
}

/** QUIT (bounded), then disconnect without reconnection; resolves once the client has ended. */
async function closeClient(client: Redis): Promise<void> {
  if (client.status === 'end') return;
  // Only a client with a socket emits 'end'; one waiting to reconnect just stops.
  const hasSocket = ['connecting', 'connect', 'ready'].includes(client.status);
  const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
  if (client.status === 'ready') {
    await drain(client, 1000);
    await bounded(
      client.quit().catch(() => undefined),
      1000,
    );
  }
  // QUIT answered and the server closed the socket: nothing is left to disconnect.
  if ((client.status as string) === 'end') return;
  if (!hasSocket) expireDisconnectTimerAtOnce(client);
  client.disconnect(false);
  if (hasSocket) await bounded(ended, 1000);
}

/**
 * ioredis's `disconnect()` arms a timer of `disconnectTimeout` ms that destroys the socket unless
 * the socket closes first — also when the socket closed long ago (a master that is down, the
 * client waiting to reconnect), and then nothing clears it: the closed module kept the process
 * (or a jest worker) alive for that long. For such a client there is no socket to wait for, so
 * the timer is made to fire at once. `disconnectTimeout` of the connector is internal to ioredis
 * (5 and 6): when it is not there, the timer keeps its length, as before.
 */
function expireDisconnectTimerAtOnce(client: Redis): void {
  const connector = (client as unknown as { connector?: { disconnectTimeout?: unknown } })
    .connector;
  if (connector && typeof connector.disconnectTimeout === 'number') connector.disconnectTimeout = 0;
}

/**
 * Waits (at most `ms`) until the client has no command in flight. A request the engine stopped
 * waiting for (its timeout passed, or its round was decided at a quorum) may still be on its way
 * — including a script re-sent with EVAL after a NOSCRIPT reply, which a QUIT sent earlier would
 * cut off: it finishes first.
 * The queue must stay empty across a timer tick, since a re-sent script is queued only after
 * the promise callbacks of the first reply have run.
 */
async function drain(client: Redis, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  let emptyChecks = 0;
  while (emptyChecks < 2 && Date.now() < deadline) {
    emptyChecks = client.commandQueue.length === 0 ? emptyChecks + 1 : 0;
    if (emptyChecks < 2) await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

async function bounded(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    promise,
    new Promise((resolve) => {
      timer = setTimeout(resolve, ms);
      timer.unref?.();
    }),
  ]);
  clearTimeout(timer);
}
