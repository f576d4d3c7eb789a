/** What a quorum agrees on about a resource (lib/core/quorum/agreement.ts): pure. */
import { agreedState } from '../../../lib/core/quorum/agreement';

const r = (holders: number, ttl: number) => ({ holders, ttl });

describe('agreedState', () => {
  it('free when fewer than a quorum report a holder', () => {
    expect(agreedState([r(1, 900), r(1, 900), r(0, 0), r(0, 0), r(0, 0)], 3)).toEqual({
      locked: false,
      holders: 0,
      ttl: 0,
    });
    expect(agreedState([r(1, 900), r(1, 900)], 3)).toEqual({ locked: false, holders: 0, ttl: 0 });
  });

  it('holders: the largest h that a quorum reports at least', () => {
    const s = agreedState([r(3, 500), r(2, 800), r(2, 300), r(1, 100), r(0, 0)], 3);
    expect(s.holders).toBe(2);
    expect(s.locked).toBe(true);
  });

  it('ttl: the largest t that a quorum of holding masters reports at least', () => {
    expect(agreedState([r(1, 100), r(1, 900), r(1, 500), r(0, 0), r(1, 50)], 3).ttl).toBe(100);
    expect(agreedState([r(1, 100), r(1, 900), r(1, 500), r(0, 0), r(0, 0)], 3).ttl).toBe(100);
    expect(agreedState([r(1, Infinity), r(1, Infinity), r(1, Infinity)], 2).ttl).toBe(-1);
    expect(agreedState([r(1, Infinity), r(1, 700), r(0, 0)], 2).ttl).toBe(700);
  });

  it('a master reporting nothing never lowers what the others confirm', () => {
    const confirmed = [r(2, 400), r(2, 400), r(2, 400)];
    expect(agreedState([...confirmed, r(0, 0), r(0, 0)], 3)).toEqual(agreedState(confirmed, 3));
  });
});
