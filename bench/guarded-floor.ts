/**
 * The "guarantees' floor": the raw floor (raw-floor.ts) with the masters' commands that our
 * engine's default guarantees need per lock and nothing else — what those guarantees cost on the
 * masters at the least, measured in the same run as the libraries (issue 54: a target beyond what
 * the masters' work allows is shown with that work).
 *
 * Acquire = one script per master: `TIME` (the clock check reads each master's clock with its
 * vote), `GET` of the boot marker (the restart quarantine), `SET key token NX PX ttl`, and on a
 * grant `INCR` of the resource's fencing counter (a counter that starts: `SET` from the clock,
 * with the counter's ttl); the reply carries the clock, the marker and the counter, as ours does
 * (`{time µs, {1, marker, counter}}`). Granted as soon as a majority answered with a
 * grant. Release = compare-and-delete plus the release announcement (`PUBLISH`), done at a
 * majority. The client reads nothing of the marker, the clock or the counter and judges no
 * validity: like the raw floor it is NOT a safe lock client, only the masters' work of the
 * guarantees and the round trips, as seen from Node with ioredis. Without fencing (the floor of
 * our fencing-off row), the acquire leaves out the counter: `{time µs, {1, marker}}`.
 *
 * With `releaseWait: 'all'` the release resolves once every master answered (or failed), not at
 * a majority: what our default release waits for (its result says whether every master deleted
 * its key, lib/core/policy/release.ts), so that floor is the least our defaults can cost —
 * the guarantees' commands and the default release's wait, nothing else.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { RawFloor } from './raw-floor';
import type { RawRetry } from './raw-floor';

/** The acquire script (KEYS: lock key, [fencing counter,] boot marker; ARGV: token, ttl, counter ttl). */
export const GUARDED_ACQUIRE_LUA = `local t = redis.call('TIME')
local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local m = redis.call('GET', KEYS[#KEYS])
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {us, {0}} end
if #KEYS == 2 then return {us, {1, m}} end
local v = redis.call('INCR', KEYS[2])
if v == 1 then
  v = tonumber(t[1]) * 1000000 + 1
  redis.call('SET', KEYS[2], string.format('%.0f', v), 'PX', ARGV[3])
end
return {us, {1, m, v}}`;
/** The release script: compare-and-delete and the announcement (KEYS: lock key; ARGV: token). */
export const GUARDED_RELEASE_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[1], ARGV[1])
  return 1
end
return 0`;
const sha = (s: string): string => createHash('sha1').update(s).digest('hex');
const ACQUIRE_SHA = sha(GUARDED_ACQUIRE_LUA);
const RELEASE_SHA = sha(GUARDED_RELEASE_LUA);

/** The fencing counters' ttl (ms): our engine's default `fencingKeyTtl`, one hour. */
const COUNTER_TTL = String(60 * 60 * 1000);

/**
 * The raw floor with the guarantees' commands (see the file comment); `marker` is the boot
 * marker's key, a resource key's fencing counter is that key + `:fence` (none when not
 * `fencing`).
 */
export class GuardedFloor extends RawFloor {
  constructor(
    clients: readonly Redis[],
    ttl: number,
    retry: RawRetry,
    private readonly marker: string,
    private readonly fencing = true,
    private readonly releaseWait: 'quorum' | 'all' = 'quorum',
  ) {
    super(clients, ttl, retry);
  }

  /** Loads both scripts on every master and sets the boot marker (once, as ours does). */
  override async init(): Promise<void> {
    await super.init();
    await Promise.all(
      this.clients.map(async (c) => {
        await c.script('LOAD', GUARDED_ACQUIRE_LUA);
        await c.script('LOAD', GUARDED_RELEASE_LUA);
        await c.set(this.marker, String(Date.now()), 'NX');
      }),
    );
  }

  /** One attempt: the token when a majority granted the key, otherwise `null`. */
  override async tryLock(key: string): Promise<string | null> {
    const token = randomBytes(16).toString('hex');
    const ttl = String(this.ttl);
    const granted = await this.majority(
      this.clients.map((c, i) => {
        this.coalesce(i);
        return this.fencing
          ? c.evalsha(ACQUIRE_SHA, 3, key, `${key}:fence`, this.marker, token, ttl, COUNTER_TTL)
          : c.evalsha(ACQUIRE_SHA, 2, key, this.marker, token, ttl);
      }),
      (r) => Array.isArray(r) && Array.isArray(r[1]) && r[1][0] === 1,
    );
    if (granted) return token;
    await this.unlock(key, token);
    return null;
  }

  /**
   * Compare-and-delete with the announcement on every master; resolves at a majority, or with
   * `releaseWait: 'all'` once every master answered.
   */
  override async unlock(key: string, token: string): Promise<void> {
    const requests = this.clients.map((c, i) => {
      this.coalesce(i);
      return c.evalsha(RELEASE_SHA, 1, key, token);
    });
    if (this.releaseWait === 'all') await Promise.allSettled(requests);
    else await this.majority(requests, () => true);
  }
}
