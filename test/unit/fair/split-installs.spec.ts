/**
 * Hand-over across processes (lib/core/fair/installs.ts `Installs.news`): an engine that parks
 * for a key keeps, per master, the token the announcements last installed there; its gathering
 * install fails at once when no token can reach a quorum any more before another is deleted,
 * and waits for the request timeout otherwise. And which token it parks: the one being installed
 * again, a new one once that was granted or failed; a failed or retired token is unparked. Pure logic: a fake store of three masters
 * (quorum 2) whose request timeout (the install's deadline) never comes within a test.
 */
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { Installs } from '../../../lib/core/fair/installs';
import type { Grant } from '../../../lib/core/store';
import type { FairContext } from '../../../lib/core/fair/fair-context';
import type { LuaScript } from '../../../lib/core/redis/scripts/lua';

const KEY = 'lock:{r}';
const X = 'xxxxxxxxxxxx' + 'x'.repeat(22);
const Y = 'yyyyyyyyyyyy' + 'y'.repeat(22);
const RELEASED = 'rrrrrrrrrrrr' + 'r'.repeat(22);
const opened: Installs[] = [];
afterEach(() => {
  for (const i of opened.splice(0)) i.close();
});

function setup(): {
  installs: Installs;
  outcomes: (Grant | undefined)[];
  releaseKeys: jest.Mock<(...args: unknown[]) => Promise<unknown>>;
  /** Every script call sent to a master: [master, script name, keys, args]. */
  evals: [number, string, readonly string[], readonly string[]][];
  token: string;
} {
  const releaseKeys = jest.fn((..._args: unknown[]) => Promise.resolve({}));
  const evals: [number, string, readonly string[], readonly string[]][] = [];
  const nodes = [0, 1, 2].map((index) => ({
    index,
    checksMarker: false,
    evalScript: (s: LuaScript, keys: readonly string[], args: readonly string[]) => {
      evals.push([index, s.name, keys, args]);
      return Promise.resolve(1);
    },
  }));
  const store = {
    quorum: 2,
    nodes,
    engineId: 'eeeeeeeeeeee',
    settings: { requestTimeout: 60_000, fencing: false, driftFactor: 0.01, keyPrefix: 'p:' },
    keyOf: (r: string) => `lock:{${r}}`,
    releaseKeys,
    ignoreOwn: () => undefined,
    // Every master's clock trusted (redis/masters/clock-watch.ts).
    clocks: { counts: () => true },
  } as unknown as FairContext;
  const installs = new Installs(store);
  opened.push(installs);
  const outcomes: (Grant | undefined)[] = [];
  installs.onResult((_r, grant) => outcomes.push(grant));
  const { token } = installs.park('r', 30_000, performance.now(), Date.now());
  return { installs, outcomes, releaseKeys, evals, token };
}

describe('split installs', () => {
  it('fail at once when no token can reach a quorum', () => {
    const { installs, outcomes, releaseKeys, token } = setup();
    installs.news(KEY, 1, RELEASED, X);
    installs.news(KEY, 2, RELEASED, Y);
    installs.news(KEY, 0, RELEASED, token);
    installs.heard(KEY, 0, token, 0, -1);
    expect(outcomes).toStrictEqual([undefined]);
    expect(releaseKeys.mock.calls[0]?.slice(0, 2)).toEqual([['r'], token]);
  });

  it('wait while another token may still reach a quorum, or a master may still install', () => {
    const { installs, outcomes, releaseKeys, token } = setup();
    installs.news(KEY, 1, RELEASED, X);
    installs.news(KEY, 2, RELEASED, X); // x may be granted: ours holds no one up
    installs.news(KEY, 0, RELEASED, token);
    installs.heard(KEY, 0, token, 0, -1);
    expect(outcomes).toStrictEqual([]);
    installs.news(KEY, 2, X, undefined); // x deleted on master 2: it may install ours next
    expect(outcomes).toStrictEqual([]);
    // Master 2 still holds the token whose release installed ours on master 0: it runs that
    // release next.
    installs.news(KEY, 2, 'zzzzzzzzzzzz', RELEASED);
    expect(outcomes).toStrictEqual([]);
    installs.news(KEY, 2, RELEASED, Y); // it installed another token instead: split
    expect(outcomes).toStrictEqual([undefined]);
    expect(releaseKeys).toHaveBeenCalledTimes(1);
  });

  it('forget what a master installed while its subscriber connection was away', () => {
    const { installs, outcomes, token } = setup();
    installs.news(KEY, 1, RELEASED, X);
    installs.news(KEY, 2, RELEASED, Y);
    installs.resubscribed(2); // announcements of master 2 were missed: y may be gone there
    installs.news(KEY, 0, RELEASED, token);
    installs.heard(KEY, 0, token, 0, -1);
    expect(outcomes).toStrictEqual([]);
  });
});

describe("an engine's token being installed", () => {
  it('is parked again until granted, not replaced by a second token', () => {
    // A second token parked where the first was not installed yet let one pass install both, on
    // different masters: neither reached a quorum (seen with the mp-trace probe: bench/README.md, "Probes").
    const { installs, outcomes, token } = setup();
    const park = (): string => installs.park('r', 30_000, performance.now(), Date.now()).token;
    installs.heard(KEY, 0, token, 0, -1); // installed on one master: gathering
    expect(park()).toBe(token);
    installs.heard(KEY, 1, token, 0, -1); // a quorum: granted
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]?.token).toBe(token);
    const next = park();
    expect(next).not.toBe(token); // used: the next wait parks a new one
    expect(park()).toBe(next);
  });

  it('is replaced once its install failed, and taken off the park where it is still parked', () => {
    const { installs, outcomes, evals, token } = setup();
    installs.heard(KEY, 0, token, 0, -1);
    installs.news(KEY, 1, RELEASED, X);
    installs.news(KEY, 2, RELEASED, Y);
    installs.news(KEY, 0, RELEASED, token); // split: fails at once
    expect(outcomes).toStrictEqual([undefined]);
    expect(evals).toStrictEqual(unparkedEverywhere(token));
    expect(installs.park('r', 30_000, performance.now(), Date.now()).token).not.toBe(token);
  });

  it('is given up when an attempt of its engine is granted: unparked, never granted', () => {
    const { installs, outcomes, releaseKeys, evals, token } = setup();
    installs.retire(token);
    expect(evals).toStrictEqual(unparkedEverywhere(token));
    expect(installs.park('r', 30_000, performance.now(), Date.now()).token).not.toBe(token);
    // An install of it that a master ran before the unpark is deleted where it landed.
    evals.length = 0;
    installs.heard(KEY, 0, token, 0, -1);
    installs.heard(KEY, 1, token, 0, -1);
    expect(outcomes).toStrictEqual([]);
    expect(evals.map((e) => e.slice(0, 2))).toStrictEqual([
      [0, 'release'],
      [1, 'release'],
    ]);
    expect(releaseKeys).not.toHaveBeenCalled();
  });

  it('fails when it was being installed already', () => {
    const { installs, outcomes, releaseKeys, evals, token } = setup();
    installs.heard(KEY, 0, token, 0, -1);
    installs.retire(token);
    expect(outcomes).toStrictEqual([undefined]);
    expect(releaseKeys.mock.calls[0]?.slice(0, 2)).toEqual([['r'], token]);
    expect(evals).toStrictEqual(unparkedEverywhere(token));
  });
});

/** The unpark of `token` sent to each of the three masters. */
function unparkedEverywhere(token: string): [number, string, string[], string[]][] {
  return [0, 1, 2].map((n) => [n, 'unpark', ['p:park:{r}'], ['eeeeeeeeeeee', token]]);
}
