/**
 * docs/scripts.md, the scripts as the masters receive them, is what scripts/script-listing.ts
 * renders from the scripts' definitions (`npm run scripts:update` writes it; commit it with the
 * change), like docs/api.md from the API reports (test/docs/api-docs.spec.ts). And each script's
 * layout (`script(name, lua, layout)`, lib/core/redis/scripts/lua.ts) agrees with its Lua and
 * with the calls the engine builds, so the layout cannot drift from the script the way comments
 * kept by hand did.
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import {
  LISTING,
  UPDATE_COMMAND,
  definitionSites,
  listedScripts,
  renderListing,
  sha1,
} from '../../scripts/script-listing';
import { definedScripts } from '../../lib/core/redis/scripts/lua';
import type { LuaScript, ScriptLayout, ScriptSlot } from '../../lib/core/redis/scripts/lua';
import type { AcquireInput, ScriptCall } from '../../lib/core/redis/kinds/kind';
import { MUTEX } from '../../lib/core/redis/kinds/mutex';
import { SHARED, semaphoreKind } from '../../lib/core/redis/kinds/holders';
import { FAIR_MUTEX } from '../../lib/core/fair/fair-mutex';
import type { FairAcquireInput } from '../../lib/core/fair/fair-mutex';
import { repoPath } from '../harness/paths';

const listed = listedScripts();

describe(LISTING, () => {
  it(`is up to date (else: run \`${UPDATE_COMMAND}\` and commit it)`, () => {
    const rendered = renderListing();
    const committed = readFileSync(repoPath(LISTING), 'utf8');
    if (committed !== rendered) {
      const a = committed.split('\n');
      const b = rendered.split('\n');
      let line = 0;
      while (line < a.length && a[line] === b[line]) line++;
      throw new Error(
        `${LISTING} is out of date: run \`${UPDATE_COMMAND}\` and commit it. First difference ` +
          `at line ${line + 1}:\n  committed: ${a[line] ?? '(end)'}\n  rendered:  ${b[line] ?? '(end)'}`,
      );
    }
  });

  it('holds every script byte for byte: each lua block hashes to its SHA1 and the script', () => {
    const text = readFileSync(repoPath(LISTING), 'utf8');
    const sections = [
      ...text.matchAll(
        /^### `([\w-]+)`\n[^#]*?SHA1\s+`([0-9a-f]{40})`[\s\S]*?^```lua\n([\s\S]*?)^```$/gm,
      ),
    ];
    const byName = new Map(definedScripts().map((s) => [s.name, s]));
    expect(sections.map((m) => m[1]).sort()).toEqual([...byName.keys()].sort());
    for (const [, name, sha, body] of sections) {
      const source = `\n${body}`;
      expect({ name, sha: sha1(source) }).toEqual({ name, sha });
      expect({ name, sha }).toEqual({ name, sha: byName.get(name)?.sha });
      expect(source === byName.get(name)?.source).toBe(true);
    }
  });
});

describe('the registry', () => {
  it('lists every script defined in lib/, each loaded by the engine', () => {
    expect(listed.map((l) => l.script.name).sort()).toEqual([...definitionSites().keys()].sort());
    expect(listed.length).toBe(definedScripts().length);
  });

  it('has no two scripts with the same text', () => {
    expect(new Set(listed.map((l) => l.script.sha)).size).toBe(listed.length);
  });
});

/** The indices `array[k]` the Lua reads with a literal k, and whether it reads others too. */
function indices(source: string, array: 'KEYS' | 'ARGV'): { literal: Set<number>; other: boolean } {
  const literal = new Set<number>();
  let other = new RegExp(`#${array}\\b`).test(source);
  for (const m of source.matchAll(new RegExp(`\\b${array}\\[([^\\]]+)\\]`, 'g'))) {
    if (/^\d+$/.test(m[1])) literal.add(Number(m[1]));
    else other = true;
  }
  return { literal, other };
}

/** How many entries the slots make for `n` lock keys, with the slots `present` (rest: 0). */
function count(
  slots: readonly ScriptSlot[],
  n: number,
  present = (_s: ScriptSlot) => true,
): number {
  return slots
    .filter(present)
    .reduce((sum, s) => sum + (s.count === 'rest' ? 0 : s.count === 'n' ? n : 1), 0);
}

/** The KEYS and ARGV indices a layout names in its texts (`ARGV[7]` in a condition, ...). */
function named(layout: ScriptLayout, array: 'KEYS' | 'ARGV'): number[] {
  const texts = [...layout.keys, ...layout.argv].flatMap((s) => [s.name, s.when ?? '']);
  texts.push(layout.reply);
  return texts.flatMap((t) =>
    [...t.matchAll(new RegExp(`\\b${array}\\[(\\d+)\\]`, 'g'))].map((m) => Number(m[1])),
  );
}

describe.each(listed.map((l) => [l.script.name, l] as const))('layout of %s', (_name, l) => {
  const { source } = l.script;
  const { keys, argv } = l.layout;

  it('ARGV: each entry is read at its index, and nothing past the last', () => {
    const { literal, other } = indices(source, 'ARGV');
    const fixed = argv.filter((s) => s.count !== 'rest');
    const rest = argv.some((s) => s.count === 'rest');
    // Fixed entries first; a `rest` entry (ARGV[k..#ARGV]) only last.
    expect(argv.findIndex((s) => s.count === 'rest')).toBe(rest ? argv.length - 1 : -1);
    expect(argv.some((s) => s.count === 'n' || s.last)).toBe(false);
    expect(Math.max(0, ...literal)).toBe(fixed.length);
    for (let k = 1; k <= fixed.length; k++)
      expect({ k, read: literal.has(k) }).toEqual({ k, read: true });
    // Indices computed in the Lua (ARGV[i + 1], #ARGV) read the rest.
    expect({ computed: other }).toEqual({ computed: rest });
  });

  it('KEYS: the literal indices fit the entries, computed ones only with a variable layout', () => {
    const { literal, other } = indices(source, 'KEYS');
    const variable = keys.some((s) => s.count !== undefined || s.last);
    const highest = Math.max(0, ...literal);
    if (variable) {
      expect({ computed: other }).toEqual({ computed: true });
      // With one lock key and every entry present, the Lua reads no key past them.
      expect(highest).toBeLessThanOrEqual(
        count(keys, 1) + (keys.some((s) => s.count === 'rest') ? Infinity : 0),
      );
    } else {
      expect({ computed: other }).toEqual({ computed: false });
      expect(highest).toBe(keys.length);
      for (let k = 1; k <= keys.length; k++)
        expect({ k, read: literal.has(k) }).toEqual({ k, read: true });
    }
    // The last key (the boot marker) is read as KEYS[#KEYS], and only a layout with one does.
    const last = keys.filter((s) => s.last);
    expect(last.length).toBeLessThanOrEqual(1);
    if (last.length) expect(keys[keys.length - 1]).toBe(last[0]);
    expect({ readsLast: source.includes('KEYS[#KEYS]') }).toEqual({ readsLast: last.length === 1 });
    // A `rest` entry only last; `withPrevious` only after an entry with a condition.
    const rest = keys.findIndex((s) => s.count === 'rest');
    if (rest >= 0) expect(rest).toBe(keys.length - 1);
    keys.forEach((s, i) => {
      if (s.withPrevious)
        expect({ i, previous: keys[i - 1]?.when !== undefined }).toEqual({ i, previous: true });
      if (s.withPrevious) expect(s.when).toBeDefined();
    });
  });

  it('names only arguments it has', () => {
    for (const k of named(l.layout, 'ARGV')) expect(k).toBeLessThanOrEqual(argv.length);
  });
});

/** The layout of `script` (every script has one). */
function layoutOf(script: LuaScript): ScriptLayout {
  const layout = script.layout;
  if (!layout) throw new Error(`${script.name}: no layout`);
  return layout;
}

/**
 * A call as the engine builds it agrees with its script's layout: a registered script; between
 * the entries that are always there and all of them, exactly all when `full`.
 */
function expectFits(call: ScriptCall, n: number, full: boolean): void {
  const { name } = call.script;
  expect(definedScripts()).toContain(call.script);
  const { keys, argv } = layoutOf(call.script);
  const always = (s: ScriptSlot) => s.when === undefined;
  const got = { name, keys: call.keys.length, args: call.args.length };
  if (!keys.some((s) => s.count === 'rest')) {
    const [lo, hi] = [count(keys, n, always), count(keys, n)];
    if (full) expect(got).toEqual({ ...got, keys: hi });
    else
      expect({ name, keys: Math.min(Math.max(got.keys, lo), hi) }).toEqual({
        name,
        keys: got.keys,
      });
  }
  if (!argv.some((s) => s.count === 'rest')) {
    const [lo, hi] = [argv.filter(always).length, argv.length];
    if (full) expect(got).toEqual({ ...got, args: hi });
    else
      expect({ name, args: Math.min(Math.max(got.args, lo), hi) }).toEqual({
        name,
        args: got.args,
      });
  }
}

describe('the calls the engine builds fit the layouts', () => {
  const plain = (n: number): AcquireInput => ({
    token: 'tok',
    ttl: 1000,
    keys: Array.from({ length: n }, (_, i) => `k${i}`),
    fenceKeys: undefined,
    marker: undefined,
    fenceTtl: 5000,
  });
  const full = (n: number): AcquireInput => ({
    ...plain(n),
    fenceKeys: plain(n).keys.map((k) => `f:${k}`),
    marker: 'marker',
    markerBirth: '123',
    waitKeys: plain(n).keys.map((k) => `w:${k}`),
    waitTtl: 200,
    clearFlags: true,
  });

  it.each([1, 2])('the plain lock, %i resource(s)', (n) => {
    expectFits(MUTEX.acquire(plain(n)), n, false);
    const call = MUTEX.acquire(full(n));
    expectFits(call, n, true);
    // Another kind met at a key: the call among the kinds.
    const among = call.followUp?.([-3, 0], call);
    expect(among).toBeDefined();
    if (among) expectFits(among, n, true);
    expectFits(MUTEX.extend('tok', 1000, plain(n).keys), n, false);
    expectFits(MUTEX.extend('tok', 1000, plain(n).keys, undefined, true), n, true);
    expectFits(MUTEX.extend('tok', 1000, plain(n).keys, { marker: undefined }), n, false);
    expectFits(MUTEX.extend('tok', 1000, plain(n).keys, { marker: 'marker' }, true), n, true);
    // The clock flag rides in ARGV[3] of the acquire (no argument of its own).
    expect(MUTEX.acquire({ ...full(n), clock: true }).args[2]).toBe('3');
    expect(MUTEX.acquire({ ...plain(n), clock: true }).args[2]).toBe('2');
    expectFits(MUTEX.release('tok', plain(n).keys, 'release'), n, true);
    expectFits(MUTEX.release('tok', plain(n).keys, false, 500), n, true);
  });

  it.each([1, 2])('shared locks and semaphores, %i resource(s)', (n) => {
    // Readers always send the writer-waiting flags (redis/attempt.ts).
    expectFits(SHARED.acquire({ ...plain(n), waitKeys: full(n).waitKeys }), n, false);
    expectFits(SHARED.acquire(full(n)), n, true);
    expectFits(semaphoreKind(3).acquire(plain(n)), n, false);
    expectFits(semaphoreKind(3).acquire({ ...full(n), waitKeys: undefined }), n, true);
    expectFits(SHARED.extend('tok', 1000, plain(n).keys), n, true);
    expectFits(SHARED.release('tok', plain(n).keys, 'cleanup'), n, false);
    expectFits(SHARED.release('tok', plain(n).keys, false, 500), n, true);
  });

  it('the fair mode', () => {
    const fair: FairAcquireInput = {
      ...full(1),
      pollKeys: ['p:k0'],
      handoverFrom: 'prev',
      defer: true,
      orderKeys: ['o:k0'],
      waitSince: 1,
      park: { key: 'pk:k0', token: 'next', life: 300, alive: 'alive:' },
    };
    expectFits(FAIR_MUTEX.acquire(fair), 1, true);
    expectFits(
      FAIR_MUTEX.acquire({ ...plain(1), handoverFrom: 'prev' } as FairAcquireInput),
      1,
      false,
    );
    const order = { keys: ['o:k0'], reserveMs: 100, since: 1, keepMs: 1000 };
    expectFits(FAIR_MUTEX.releaseAs('tok', ['k0'], 'yield', undefined), 1, false);
    expectFits(
      FAIR_MUTEX.releaseAs('tok', ['k0'], 'pass', { ...order, since: undefined }),
      1,
      false,
    );
    const install = {
      parkKey: 'pk:k0',
      token: 'next',
      ttl: 1000,
      life: 300,
      fenceKey: 'f:k0',
      fenceTtl: 5000,
      marker: 'marker',
      alive: 'alive:',
      after: '',
    };
    expectFits(FAIR_MUTEX.releaseAs('tok', ['k0'], 'yield', { ...order, install }), 1, true);
  });
});
