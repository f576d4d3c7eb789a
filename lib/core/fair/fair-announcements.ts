/**
 * Release announcements as the fair mode hears them: besides a release (`token`) and a clean-up
 * (`~token`, redis/masters/handoff.ts `announcementOf`), a yield (`^token`, yield-announce.ts
 * `YIELD_PREFIX`), which may name the engine it reserved the key for (`^token:engine`) and the
 * parked token it installed there (`^token:engine:installed:fence:age`, install-scripts.ts).
 */
import type { Announced } from '../base/announcements';
import { announcementOf } from '../redis/masters/handoff';
import { RESERVED_SEP, YIELD_PREFIX } from './yield-announce';

/**
 * What a fair-mode announcement says: {@link Announced}, or `yield`: a holder whose engine has
 * more local waiters released it so that other processes' waiters go first — they attempt in
 * the order of how long they waited (streak.ts, raceDelay).
 */
export type FairAnnounced = Announced | 'yield';

/**
 * For whom an ordered yield reserved the key (yield-announce.ts `RESERVED_SEP`): this engine or
 * another one.
 */
export type Reserved = 'own' | 'other';

/**
 * Called for each announcement of a watched resource in the fair mode: as `AnnouncementListener`,
 * plus `reserved` — the master reserved the key, on an ordered yield, for this engine (`'own'`)
 * or for another one (`'other'`; undefined when for nobody: streak.ts `RESERVE_MS`) — and
 * `installed` — the yield, reserved for this engine, installed its parked token instead
 * (README.md here): the outcome comes through `FairLockStore.onInstalled`.
 */
export type FairAnnouncementListener = (
  announced: FairAnnounced,
  token: string,
  repeat: boolean,
  reserved?: Reserved,
  installed?: boolean,
) => void;

/** A parked token a yield installed, as its announcement names it. */
export interface AnnouncedInstall {
  readonly token: string;
  readonly fence: number;
  /** The master's boot marker age when it installed (-1: not checked). */
  readonly age: number;
}

/** One fair-mode announcement, read (see the file comment). */
export interface FairMessage {
  readonly announced: FairAnnounced;
  /** The token whose keys were deleted (for an attempt's install: the attempting one). */
  readonly token: string;
  readonly reserved?: Reserved;
  /** The parked token the yield installed (any engine's). */
  readonly install?: AnnouncedInstall;
}

/** Reads a raw announcement heard by `engineId`'s engine. */
export function readFair(raw: string, engineId: string): FairMessage {
  if (!raw.startsWith(YIELD_PREFIX)) return announcementOf(raw);
  const parts = raw.slice(YIELD_PREFIX.length).split(RESERVED_SEP);
  const [token, engine] = parts;
  const reserved: Reserved | undefined =
    engine === undefined ? undefined : engine === engineId ? 'own' : 'other';
  const install =
    parts.length === 5
      ? { token: parts[2], fence: Number(parts[3]), age: Number(parts[4]) }
      : undefined;
  return { announced: 'yield', token, reserved, install };
}

/**
 * The part of a raw announcement that tells repeats apart: every master announces one release
 * once, but a yield's install part (fence, age) differs between masters.
 */
export function fairSeenAs(raw: string): string {
  if (!raw.startsWith(YIELD_PREFIX)) return raw;
  const parts = raw.split(RESERVED_SEP);
  return parts.length === 5 ? `${parts[0]}${RESERVED_SEP}${parts[1]}` : raw;
}
