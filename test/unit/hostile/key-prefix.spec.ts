/**
 * Key prefixes that overlap: two engines on the same masters with
 * different accepted prefixes must never share a Redis key, whatever the kind of key (lock,
 * fencing counter, writer-waiting flag, the fair mode's keys, boot marker, run id) and whatever
 * the resource. A prefix `P + "fence:"` would make its lock keys the fencing counters of `P`,
 * `P + "wait:"` its writer-waiting flags (and so on for each namespace of base/keys.ts
 * `RESOURCE_KEY_INFIXES`); they are refused with a typed error.
 */
import { InvalidConfigurationError } from '../../../lib/core/base/errors';
import { orderKey, parkKey, pollKey } from '../../../lib/core/fair/fair-keys';
import {
  RESOURCE_KEY_INFIXES,
  fenceKey,
  lockKey,
  markerKey,
  markerRunKey,
  waitKey,
} from '../../../lib/core/base/keys';
import { resolveSettings } from '../../../lib/core/base/settings';
import { KEY_PREFIX_SEPARATORS, checkKeyPrefix } from '../../../lib/core/base/validate';

const make = (field: string, problem: string): Error =>
  new InvalidConfigurationError(field, problem);

function accepted(prefix: string): boolean {
  try {
    checkKeyPrefix('keyPrefix', prefix, make);
    return true;
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidConfigurationError);
    return false;
  }
}

/** Every sequence of 1..`depth` tokens, joined. */
function sequences(tokens: readonly string[], depth: number): string[] {
  let level = [''];
  const all: string[] = [];
  for (let d = 0; d < depth; d++) {
    level = level.flatMap((s) => tokens.map((t) => s + t));
    all.push(...level);
  }
  return all;
}

// Words the key formats use, separators, and a plain word: every way a prefix can end in, or
// contain, a part of another key's format.
const TOKENS = ['lock', 'fence', 'boot', 'run', 'x', ...KEY_PREFIX_SEPARATORS, 'boot:'].concat(
  RESOURCE_KEY_INFIXES,
);
// Resources with and without "}" (hashed tags), and ones that spell parts of key formats.
const RESOURCES = ['a', 'boot', 'run', 'fence:a', '}a', 'a}', 'a}b', '{a}', ':run', 'x}fence:{a}'];

describe('key prefixes', () => {
  it('refuses a prefix whose lock keys are the fencing counters of another prefix', () => {
    for (const prefix of ['lock:fence:', 'app/fence:', 'a.fence:', 'x#fence:']) {
      let error: unknown;
      try {
        resolveSettings({ keyPrefix: prefix }, 3);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(InvalidConfigurationError);
      expect((error as InvalidConfigurationError).field).toBe('keyPrefix');
      // The message names the prefix it would collide with and a safe alternative.
      expect((error as Error).message).toContain(JSON.stringify(prefix.slice(0, -6)));
      expect((error as Error).message).toContain(
        JSON.stringify(`${prefix.slice(0, -6)}fence-locks:`),
      );
      expect(accepted(`${prefix.slice(0, -6)}fence-locks:`)).toBe(true);
    }
    // The proof of the overlap the rule prevents:
    expect(lockKey('lock:fence:', 'r')).toBe(fenceKey('lock:', 'r'));
  });

  it("refuses a prefix whose lock keys are another prefix's writer-waiting flags or fair-mode keys", () => {
    const keyOf = { 'wait:': waitKey, 'poll:': pollKey, 'order:': orderKey, 'park:': parkKey };
    for (const [infix, key] of Object.entries(keyOf)) {
      // The overlap the rule prevents: `app:<infix>`'s lock keys are `app:`'s keys of the namespace.
      expect(lockKey(`app:${infix}`, 'r')).toBe(key('app:', 'r'));
      expect(accepted(`app:${infix}`)).toBe(false);
      expect(accepted(`app/${infix}`)).toBe(false);
      expect(accepted(infix)).toBe(true); // nothing before it: no prefix it would overlap
      expect(accepted(`app:${infix.slice(0, -1)}s:`)).toBe(true);
    }
  });

  it('keeps prefixes that cannot be the fencing namespace of an accepted prefix', () => {
    for (const prefix of ['fence:', 'myfence:', 'lock:fencing:', 'lock:fence-', 'fence:x:']) {
      expect(resolveSettings({ keyPrefix: prefix }, 3).keyPrefix).toBe(prefix);
    }
  });

  it('no two accepted prefixes share any key, of any kind, for any resource', () => {
    const prefixes = [...new Set(sequences(TOKENS, 3))].filter(accepted);
    // The search space holds the neighbours of the dangerous shapes.
    for (const p of ['lock:', 'fence:', 'boot:', 'lock:boot:', 'fence:boot:', 'lockfence:']) {
      expect(prefixes.includes(p)).toBe(true);
    }
    expect(prefixes.length).toBeGreaterThan(1000);

    const owner = new Map<string, string>();
    const collisions: string[] = [];
    const add = (key: string, who: string): void => {
      const other = owner.get(key);
      if (other !== undefined && other !== who) collisions.push(`${key}: ${other} / ${who}`);
      owner.set(key, who);
    };
    for (const p of prefixes) {
      const marker = markerKey(p);
      add(marker, `marker(${p})`);
      add(markerRunKey(marker), `run(${p})`);
      for (const r of RESOURCES) {
        add(lockKey(p, r), `lock(${p}, ${r})`);
        // One counter per Cluster slot, shared by the prefix's resources of that slot (base/keys.ts).
        add(fenceKey(p, r), `fence(${p})`);
        add(waitKey(p, r), `wait(${p}, ${r})`);
        add(pollKey(p, r), `poll(${p}, ${r})`);
        add(orderKey(p, r), `order(${p}, ${r})`);
        add(parkKey(p, r), `park(${p}, ${r})`);
      }
    }
    expect(collisions.slice(0, 5)).toEqual([]);
    const counters = new Set(RESOURCES.map((r) => fenceKey('lock:', r))).size;
    expect(counters).toBeGreaterThan(1);
    expect(owner.size).toBe(prefixes.length * (2 + 5 * RESOURCES.length + counters));
  });
});
