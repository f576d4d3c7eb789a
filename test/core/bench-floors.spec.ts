/**
 * The benchmark's floors (bench/raw-floor.ts, bench/guarded-floor.ts) on real masters: what one
 * tick sends to a master leaves in one write, as our engine's does — a lone caller's commands are
 * written at once (no cork), 64 callers' commands of one tick cork each master's socket until the
 * tick ends — and every lock is still granted, released and gone from the masters afterwards, so
 * the floors stay floors at 64 parallel (without the coalescing every command was its own write
 * and the raw floor ran below our engine). The guarantees' floor's release resolves at a majority,
 * or — the floor of our default release — only once every master answered.
 */
import type { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { GuardedFloor } from '../../bench/guarded-floor';
import { RawFloor } from '../../bench/raw-floor';
import { useMasters } from '../harness/engines';
import { uniqueResource } from '../harness/util';

const suite = useMasters(3);
const RETRY = { retryDelay: 10, retryJitter: 0, retryCount: 0 };

/** Counts `cork()` on every client's socket until `restore()`. */
function countCorks(clients: readonly Redis[]): { corks: number[]; restore: () => void } {
  const corks = clients.map(() => 0);
  const undo = clients.map((c, i) => {
    const stream = c.stream as Writable;
    const cork = stream.cork;
    stream.cork = function (this: Writable) {
      corks[i]++;
      cork.call(this);
    };
    return () => {
      stream.cork = cork;
    };
  });
  return { corks, restore: () => undo.forEach((u) => u()) };
}

const floors = [
  ['raw floor', (c: Redis[]) => new RawFloor(c, 10_000, RETRY)],
  [
    "guarantees' floor",
    (c: Redis[]) => new GuardedFloor(c, 10_000, RETRY, `${uniqueResource('marker')}`),
  ],
] as const;

describe.each(floors)('%s', (_name, make) => {
  it('writes a lone caller at once and 64 callers of one tick per master, corked; every lock works', async () => {
    const clients = suite.clients;
    const floor = make(clients);
    await floor.init();
    const { corks, restore } = countCorks(clients);
    try {
      const lone = uniqueResource('lone');
      const token = await floor.tryLock(lone);
      expect(token).not.toBeNull();
      await floor.unlock(lone, token as string);
      expect(corks).toEqual([0, 0, 0]);

      const keys = Array.from({ length: 64 }, (_, i) => uniqueResource(`par${i}`));
      const tokens = await Promise.all(keys.map((k) => floor.tryLock(k)));
      expect(tokens.every((t) => typeof t === 'string')).toBe(true);
      await Promise.all(keys.map((k, i) => floor.unlock(k, tokens[i] as string)));
      for (const n of corks) expect(n).toBeGreaterThan(0);
      for (const c of clients) expect((c.stream as Writable).writableCorked).toBe(0);
      // A release resolves at a majority; the other master's delete went out before, on the same
      // connection, so it is answered before this read.
      const left = await Promise.all(clients.map((c) => c.exists(lone, ...keys)));
      expect(left).toEqual([0, 0, 0]);
    } finally {
      restore();
    }
  });
});

describe("guarantees' floor: when its release resolves", () => {
  /** Locks a key, pauses the third master, unlocks; `whilePaused` reads the unlock's promise. */
  const unlockWithOnePaused = async (
    releaseWait: 'quorum' | 'all',
    whilePaused: (unlocked: Promise<string>) => Promise<string>,
  ): Promise<{ whilePaused: string; after: string }> => {
    const floor = new GuardedFloor(
      suite.clients,
      10_000,
      RETRY,
      uniqueResource('marker'),
      true,
      releaseWait,
    );
    await floor.init();
    const key = uniqueResource(`wait-${releaseWait}`);
    const token = await floor.tryLock(key);
    expect(token).not.toBeNull();
    const paused = suite.masters.masters[2];
    paused.pause();
    try {
      const unlocked = floor.unlock(key, token as string).then(() => 'resolved');
      const seen = await whilePaused(unlocked);
      paused.resume();
      return { whilePaused: seen, after: await unlocked };
    } finally {
      paused.resume();
    }
  };

  it('at a majority by default, while a master does not answer', async () => {
    // Resolves with the third master stopped (waiting for it would time the test out).
    expect(await unlockWithOnePaused('quorum', (unlocked) => unlocked)).toEqual({
      whilePaused: 'resolved',
      after: 'resolved',
    });
  });

  it("with releaseWait 'all', once every master answered", async () => {
    // A stopped master cannot answer: the release is still pending when the timer fires, however
    // slow the machine, and resolves once the master runs again.
    const timer = () => new Promise<string>((r) => setTimeout(() => r('pending'), 300));
    expect(
      await unlockWithOnePaused('all', (unlocked) => Promise.race([unlocked, timer()])),
    ).toEqual({ whilePaused: 'pending', after: 'resolved' });
  });
});
