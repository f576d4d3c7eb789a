/**
 * The fair mode (`fairness: 'across-processes'`; design: lib/core/fair/README.md), as the rest
 * of the library reaches it: one door. The engine takes the mode ({@link fairMode}); the testing
 * module's in-memory store reads the one field of a fair request it honours (a local hand-over).
 */
import type { EngineMode } from '../waiting/waiting';
import { FairQueue } from './fair-queue';
import { FairRedisStore } from './fair-redis-store';

/** The fair mode: the fair Redis store and the fair waiting policy over a store. */
export const fairMode: EngineMode = {
  store: (clients, settings) => new FairRedisStore(clients, settings),
  queue: (store, draining) => new FairQueue(store, draining),
};

export type { FairAttemptRequest } from './fair-store';
