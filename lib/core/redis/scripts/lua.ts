import { createHash } from 'node:crypto';
import type { Connection } from '../connection/connection';

/** A Lua script, called by SHA1 (EVALSHA) with a fallback to EVAL on NOSCRIPT. */
export interface LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
  /** What it takes and answers (every script defined with {@link script} has one). */
  readonly layout?: ScriptLayout;
}

/**
 * One entry of a script's KEYS or ARGV, as data beside the Lua: docs/scripts.md lists it
 * (scripts/script-listing.ts), test/unit/script-listing.spec.ts holds it to the Lua's indices.
 */
export interface ScriptSlot {
  /** What the entry holds. */
  readonly name: string;
  /** How many: one (default), `n` (one per lock key), or `rest` (every remaining one). */
  readonly count?: 'n' | 'rest';
  /** Present only then (a condition on the arguments); an absent entry shifts the later ones... */
  readonly when?: string;
  /** ...except those present only with it: this entry comes only with the one before it. */
  readonly withPrevious?: boolean;
  /** The last key, whatever comes before it (`KEYS[#KEYS]`). */
  readonly last?: boolean;
}

/** A script's KEYS and ARGV, in order, and the shapes of its reply. */
export interface ScriptLayout {
  readonly keys: readonly ScriptSlot[];
  readonly argv: readonly ScriptSlot[];
  /** The reply's shapes (Markdown). */
  readonly reply: string;
}

/** Every script defined with {@link script}, in definition order (loaded on connect). */
const defined: LuaScript[] = [];

/**
 * Names a Lua source and computes its SHA1 once; the script is loaded on every master's connect.
 * `layout` (its KEYS, ARGV and reply) is data for docs/scripts.md: never sent.
 */
export function script(name: string, source: string, layout: ScriptLayout): LuaScript {
  const s = { name, source, sha: createHash('sha1').update(source).digest('hex'), layout };
  defined.push(s);
  return s;
}

/** The scripts {@link loadScripts} loads: every script the engine defines. */
export function definedScripts(): readonly LuaScript[] {
  return defined;
}

/**
 * Loads every script the engine defines on a standalone master (SCRIPT LOAD, pipelined; nothing
 * runs), right after it (re)connects (redis/masters/node.ts): the first call of each script on a fresh,
 * restarted or flushed master then finds it, instead of answering NOSCRIPT and sending the source
 * again one round-trip later. Besides that round-trip, the fallback lets commands written
 * meanwhile on the same connection run first: the EVAL of a release answered NOSCRIPT ran after
 * a read sent once the other masters had confirmed the release, which saw the released key
 * still there (flake check, protocols.spec). Never rejects: a master whose ACL forbids SCRIPT,
 * or one that goes away meanwhile, falls back to EVAL on NOSCRIPT as before.
 */
export function loadScripts(client: Connection): Promise<void> {
  return Promise.all(defined.map((s) => client.scriptLoad(s.source).catch(() => undefined))).then(
    () => undefined,
  );
}

/**
 * The one EVALSHA → EVAL fallback: runs `s` by its SHA1 and, when the server does not know it
 * (NOSCRIPT: a restarted or flushed master), sends the source. The EVAL goes out after whatever
 * was sent meanwhile; when `stillWanted()` says the caller has moved on (a release of the same
 * token may already be on the wire), it is not sent at all — a late acquire must never land
 * after its own release. The script is then loaded without running it (SCRIPT LOAD, standalone
 * masters; a Cluster would pick any node), so that the next call does not pay the NOSCRIPT
 * round-trip again: an acquire decided by the other masters before a restarted one answered
 * used to leave it without the script for every later call.
 *
 * `beforeFallback` runs right before the EVAL or SCRIPT LOAD is sent (the caller's write
 * coalescing, redis/masters/node.ts: the fallbacks of many calls answered NOSCRIPT together leave in
 * one write too).
 *
 * The outcome is delivered, not returned: `onReply` gets the reply (of the EVALSHA, or of the EVAL
 * after a fallback), `onError` the error (a NOSCRIPT not sent again included) — one of them
 * exactly once, in the EVALSHA's (or the EVAL's) own continuation, without a promise of the
 * caller's per call (the voting rounds' hot path: redis/masters/dispatch.ts). `onReply` must not
 * throw. {@link evalScript} is the same as a promise.
 */
export function evalScriptInto(
  client: Connection,
  s: LuaScript,
  keys: readonly string[],
  args: readonly (string | Buffer)[],
  stillWanted: (() => boolean) | undefined,
  beforeFallback: (() => void) | undefined,
  onReply: (reply: unknown) => void,
  onError: (err: unknown) => void,
): void {
  const fallback = (err: unknown): void => {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) return onError(err);
    if (stillWanted && !stillWanted()) {
      if (!client.cluster) {
        beforeFallback?.();
        client.scriptLoad(s.source).catch(() => undefined);
      }
      return onError(err);
    }
    beforeFallback?.();
    client.eval(s.source, keys, args).then(onReply, onError);
  };
  client.evalsha(s.sha, keys, args).then(onReply, fallback);
}

/**
 * {@link evalScriptInto} (the one EVALSHA → EVAL fallback) as a promise: the reply, or — with
 * `onReply` — what `onReply` turns it into (what it throws rejects the result).
 */
export function evalScript<T = unknown>(
  client: Connection,
  s: LuaScript,
  keys: readonly string[],
  args: readonly (string | Buffer)[],
  stillWanted?: () => boolean,
  beforeFallback?: () => void,
  onReply?: (reply: unknown) => T | PromiseLike<T>,
): Promise<T> {
  return new Promise<T>((resolve, reject) =>
    evalScriptInto(
      client,
      s,
      keys,
      args,
      stillWanted,
      beforeFallback,
      (raw) => {
        try {
          // (Without `onReply`, `T` is the reply's own `unknown`.)
          resolve(onReply ? onReply(raw) : (raw as T));
        } catch (err) {
          reject(err);
        }
      },
      reject,
    ),
  );
}

/**
 * Lua shared by the scripts that check a master's boot marker (restart quarantine, see
 * lib/core/redis/masters/node.ts): sets `age` to how long ago (ms, server clock) the master's data set
 * was born, reading the marker at `markerKey` (a Lua expression); a missing marker is born now
 * (age 0), so a master that lost its data set is in quarantine. Inlined rather than a Lua
 * function: a function definition would be re-created on every call of the script.
 *
 * With `knownBirth` (a Lua expression naming an argument), the caller may pass the marker value it
 * already knows to be older than the quarantine (`MasterNode.knownBirth`): when the marker still
 * holds exactly that value, `age` is -2 ("known old") without reading the clock — one GET instead
 * of TIME + GET per call. Any other value (a flushed master re-seeded by another engine, a
 * restart) takes the full path. Callers that pass '1' (not known) always take the full path: a
 * marker is a time in ms, never '1'.
 *
 * With `clock` (a Lua expression: the script's reading of `TIME`, or nil), the age is computed
 * from that reading instead of a second one.
 */
export function bootMarkerAge(markerKey: string, knownBirth?: string, clock?: string): string {
  // The script's own reading of the clock, when it took one (CLOCK_LUA), else one now.
  const time = clock === undefined ? "redis.call('TIME')" : `${clock} or redis.call('TIME')`;
  const ageOf = (raw: string): string => `
  local t = ${time}
  local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local birth = tonumber(${raw})
  if not birth then
    birth = nowMs
    redis.call('SET', ${markerKey}, birth)
  end
  age = nowMs - birth`;
  if (knownBirth === undefined) return ageOf(`redis.call('GET', ${markerKey})`);
  return `
  local known = redis.call('GET', ${markerKey})
  if known and known == ${knownBirth} then
    age = -2
  else${ageOf('known')}
  end`;
}

/**
 * The clock check's part of a script (redis/masters/clock-watch.ts): when `flag` (a Lua
 * condition) holds, `local clock` is the master's `TIME`, read once at the start, and every reply
 * goes out as `{time, reply}`, the time in µs since the epoch ({@link clockedReturn}); else
 * `clock` is nil and replies go out as they are. Dispatch (redis/masters/dispatch.ts) unwraps a
 * call sent with the flag (`ScriptCall.clocked`) and records the reading, bracketed by the
 * request's round trip: the master's clock comes with the vote, at the cost of one TIME inside
 * the script instead of a command of its own.
 */
export function clockLua(flag: string): string {
  return `
local clock = nil
if ${flag} then clock = redis.call('TIME') end`;
}

/**
 * Lua statement: returns `reply` (an expression), wrapped with the script's clock when read. The
 * clock goes out as one integer (µs since the epoch: 16 digits, exact in Lua's doubles and in
 * JavaScript's numbers), not as `TIME`'s two strings: the client decodes one integer instead of
 * two strings per vote.
 */
export function clockedReturn(reply: string): string {
  return `do
  local reply = ${reply}
  if clock then return {tonumber(clock[1]) * 1000000 + tonumber(clock[2]), reply} end
  return reply
end`;
}

/** What a reply of a script with {@link clockLua} looks like, as its layout says it. */
export const CLOCKED_REPLY =
  "With the clock flag, the reply comes as `{time, reply}`: the master's `TIME` in " +
  'microseconds since the epoch (one integer), read once at the start of the script ' +
  '(redis/masters/clock-watch.ts).';
