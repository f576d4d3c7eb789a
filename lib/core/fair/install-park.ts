/**
 * The state of the tokens an engine parked for the hand-over across processes
 * (fair/installs.ts; design: lib/core/fair/README.md).
 */
import type { Grant } from '../store';

/** What a master announced of an install: its fencing counter and boot marker age. */
export interface Installed {
  readonly fence: number;
  readonly age: number;
}

/** One token this engine parked for a resource, and what became of it. */
export interface Park {
  readonly resource: string;
  /** Its lock key (announcements name keys). */
  readonly key: string;
  readonly token: string;
  readonly ttl: number;
  /** How long a master keeps it installable after each park. */
  readonly life: number;
  /** Monotonic and wall ms of the token's first send: validity runs from there. */
  readonly start: number;
  readonly wallStart: number;
  /** Per master, the install it announced. */
  readonly heard: (Installed | undefined)[];
  state: 'parked' | 'gathering' | 'granted' | 'failed';
  timer: ReturnType<typeof setTimeout> | undefined;
  /** The grant made of it, once granted: its lock's end tells whether a late install is its. */
  grant?: Grant;
  /**
   * The tokens whose release installed it, with the number of masters that announced each: a
   * master still holding one runs that release next (and the one of most masters is the grant's
   * `installedBy`).
   */
  from?: Map<string, number>;
}

/** A token that a master announced installed on a key, and when (monotonic ms). */
export interface Held {
  readonly token: string;
  readonly at: number;
}

/** Whether `p` may still be installed: parked, or installed on too few masters so far. */
export function isOut(p: Park): boolean {
  return p.state === 'parked' || p.state === 'gathering';
}
