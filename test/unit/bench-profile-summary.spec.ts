/**
 * The benchmark's per-operation profile summary (bench/profile-summary.ts, used by bench/profile.ts):
 * a synthetic profile with known sample times checks what is counted where — idle and socket
 * writes apart from the rest, self time per function and per file, inclusive time of `lib/`
 * functions counted once per sample even when a function recurses.
 */
import type { CpuProfile } from '../../bench/profile-summary';
import { formatSummary, summarizeProfile } from '../../bench/profile-summary';

const frame = (functionName: string, url = '') => ({ functionName, url, lineNumber: 0 });
const LIB = 'file:///repo/lib/core/redis-attempt.ts';
const IOREDIS = 'file:///repo/node_modules/ioredis/built/Command.js';

// (root) ─┬─ attempt (lib) ─┬─ attempt (lib, recursing) ── Command (ioredis) ── writeUtf8String
//         │                 └─ Command (ioredis)
//         ├─ (idle)
//         └─ (garbage collector)
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame('(root)'), children: [2, 6, 7] },
    { id: 2, callFrame: frame('attempt', LIB), children: [3, 5] },
    { id: 3, callFrame: frame('attempt', LIB), children: [4] },
    { id: 4, callFrame: frame('Command', IOREDIS), children: [8] },
    { id: 5, callFrame: frame('Command', IOREDIS) },
    { id: 6, callFrame: frame('(idle)') },
    { id: 7, callFrame: frame('(garbage collector)') },
    { id: 8, callFrame: frame('writeUtf8String') },
  ],
  // Sample i lands on samples[i] and lasted timeDeltas[i] µs; the first delta is the time from
  // the profiler's start to its first sample, not a sample's (it must not count).
  samples: [2, 2, 3, 4, 5, 6, 6, 7, 8],
  timeDeltas: [170_000, 10, 20, 30, 40, 100, 100, 5, 60],
};

describe('bench/profile-summary summarizeProfile', () => {
  const s = summarizeProfile(profile, 5);

  it('splits the sampled time per op into idle, socket writes and the rest', () => {
    expect(s.totalUsPerOp).toBeCloseTo(365 / 5);
    expect(s.idleUsPerOp).toBeCloseTo(200 / 5);
    expect(s.writeUsPerOp).toBeCloseTo(60 / 5);
    expect(s.jsUsPerOp).toBeCloseTo((10 + 20 + 30 + 40 + 5) / 5);
  });

  it('sums self time per function and per file, largest first', () => {
    const fn = Object.fromEntries(s.selfByFunction.map((r) => [r.name, r.usPerOp]));
    expect(fn['Command node_modules/ioredis']).toBeCloseTo(70 / 5);
    expect(fn['attempt lib/core/redis-attempt.ts']).toBeCloseTo(30 / 5);
    expect(fn['(idle)']).toBeCloseTo(40);
    expect(s.selfByFunction[0].name).toBe('(idle)');
    const file = Object.fromEntries(s.selfByFile.map((r) => [r.name, r.usPerOp]));
    expect(file['node_modules/ioredis']).toBeCloseTo(14);
    expect(file['lib/core/redis-attempt.ts']).toBeCloseTo(6);
    expect(file.writeUtf8String).toBeCloseTo(12);
  });

  it("counts a lib/ function's inclusive time once per sample, recursion included", () => {
    // Samples under `attempt`: 10 + 20 + 30 + 40 + 60 (the write under it) = 160.
    expect(s.inclusiveLib).toStrictEqual([
      { name: 'attempt lib/core/redis-attempt.ts', usPerOp: 160 / 5 },
    ]);
  });

  it('refuses a non-positive operation count', () => {
    expect(() => summarizeProfile(profile, 0)).toThrow(/ops must be positive/);
  });

  it('formats the totals and the tables', () => {
    const text = formatSummary(s, 2);
    expect(text).toContain('sampled 73.0 µs per op: idle 40.0, socket writes 12.0, the rest 21.0');
    expect(text).toContain("inclusive, the project's lib/ (µs per op)");
    expect(text.split('\n')).toHaveLength(1 + 3 * 3 - 1); // the lib/ table has one row
  });
});
