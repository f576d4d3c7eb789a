/**
 * The Timeline (lib/core/base/clock.ts): many deadlines, one timer. With `keepArmed` (the
 * voting rounds' timeouts of a store), the timer survives an empty heap, unref'd, so short
 * deadlines set and cancelled one after another cost no `setTimeout` each.
 */
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { Timeline, monotonicNow } from '../../../lib/core/base/clock';

const timeouts = (): number =>
  process.getActiveResourcesInfo().filter((t) => t === 'Timeout').length;

afterEach(() => {
  jest.restoreAllMocks();
});

describe('Timeline', () => {
  it('keepArmed: deadlines set and cancelled one after another reuse one timer', () => {
    const line = new Timeline(true);
    const armed = jest.spyOn(globalThis, 'setTimeout');
    const base = timeouts();
    for (let i = 0; i < 50; i++) {
      const entry = line.add(monotonicNow() + 1000, () => undefined);
      expect(timeouts()).toBe(base + 1); // a pending deadline holds the process
      line.remove(entry);
      expect(timeouts()).toBe(base); // the kept timer does not
    }
    expect(armed).toHaveBeenCalledTimes(1);
    line.clear();
  });

  it('without keepArmed, an empty heap leaves no timer (one setTimeout per deadline)', () => {
    const line = new Timeline();
    const armed = jest.spyOn(globalThis, 'setTimeout');
    for (let i = 0; i < 5; i++) line.remove(line.add(monotonicNow() + 1000, () => undefined));
    expect(armed).toHaveBeenCalledTimes(5);
  });

  it('keepArmed: a kept timer never fires a deadline early, and an earlier one re-arms', async () => {
    const line = new Timeline(true);
    // Kept armed for a deadline 40 ms away, then emptied.
    line.remove(line.add(monotonicNow() + 40, () => undefined));
    const fired: [string, number][] = [];
    const late = monotonicNow() + 120;
    const early = monotonicNow() + 10;
    await new Promise<void>((resolve) => {
      line.add(late, () => {
        fired.push(['late', monotonicNow() - late]);
        resolve();
      });
      line.add(early, () => fired.push(['early', monotonicNow() - early]));
    });
    expect(fired.map(([name]) => name)).toEqual(['early', 'late']);
    // Never before its time (the kept timer fired at 40 ms and re-armed for the later one).
    for (const [, lateness] of fired) expect(lateness).toBeGreaterThanOrEqual(0);
    expect(line.size).toBe(0);
    expect(Reflect.get(line, 'timer')).toBeUndefined(); // fired with an empty heap: none left
  });
});
