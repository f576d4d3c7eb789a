/** What the fair mode's masters side needs of its store (fair-redis-store.ts). */
import type { RedisContext } from '../redis/context';

/** What an attempt asks of the installs (installs.ts `Installs`). */
export interface ParkedTokens {
  /** The token to park for `resource`, and for how long a master keeps it installable. */
  park(resource: string, ttl: number, start: number, wall: number): { token: string; life: number };
  /** `token` was granted by this engine's own attempt: it is not parked any more. */
  retire(token: string): void;
}

/** What the fair parts need of the store, beside the plain context. */
export interface FairContext extends RedisContext {
  /** This engine's parked tokens (installs.ts `Installs`). */
  readonly installs: ParkedTokens;
  /** Whether this engine hears the release announcements of the lock key `key` now. */
  hears(key: string): boolean;
}
