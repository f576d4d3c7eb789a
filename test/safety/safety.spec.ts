/**
 * Short CI run of the multi-process safety soak (controller.ts; the long run is
 * `npm run test:safety -- --duration 60`).
 *
 * REDLOCK.md, "Properties we promise" 1 (mutual exclusion within the validity window) and
 * "Crash recovery": with the engine's defaults (restart quarantine on) no fault may produce a
 * violation; with quarantine off, restarting a majority of masters under a holder must produce
 * one — which also proves that the checker can fail. The checker's other rules are proven on
 * hand-made logs first.
 */
import { rmSync } from 'node:fs';
import { runSoak } from './controller';
import { check, formatReport } from './checker';
import { CRASH_RECOVERY_FAULTS, EnterEvent, ExitEvent, FaultEvent, WorkerEvent } from './protocol';

const show = (title: string, text: string): void => {
  process.stdout.write(`\n${title}\n${text}\n`);
};

/** A critical section as the worker logs it: [start, end], validity until `validityEnd`. */
function section(
  worker: number,
  seq: number,
  start: number,
  end: number | undefined,
  validityEnd: number,
  token: number,
  exit: Partial<ExitEvent> = {},
): WorkerEvent[] {
  const enter: EnterEvent = {
    ev: 'enter',
    worker,
    seq,
    mode: 'normal',
    ttl: 400,
    start,
    wall: start,
    validityEnd,
    fencingToken: token,
    okMasters: [0, 1, 2],
    attempts: 1,
  };
  if (end === undefined) return [enter];
  return [
    enter,
    {
      ev: 'exit',
      worker,
      seq,
      end,
      wall: end,
      validityEnd,
      aborted: end > validityEnd,
      abortedAt: end > validityEnd ? validityEnd + 1 : null,
      abortReason: null,
      extensions: 0,
      extendError: null,
      read: 0,
      write: 'ok',
      error: null,
      ...exit,
    },
  ];
}

describe('safety checker (hand-made logs)', () => {
  const kinds = (
    events: WorkerEvent[],
    faults: FaultEvent[] = [],
    counter = { value: 2, accepted: 2 },
  ) => check(events, faults, counter).violations.map((v) => v.kind);

  it('accepts back-to-back sections and a paused holder clipped at its validity end', () => {
    const events = [
      ...section(0, 1, 100, 150, 490, 10),
      ...section(1, 1, 150.5, 200, 540, 11), // entered after the first one ended
      ...section(0, 2, 300, 1000, 690, 12, { aborted: true }), // paused past its validity...
      ...section(1, 2, 695, 720, 1090, 13), // ...while another worker held the lock
    ];
    const report = check(events, [], { value: 4, accepted: 4 });
    expect(report.violations).toEqual([]);
    expect(report.pastValidity).toBe(1);
    expect(report.pastValiditySuperseded).toBe(1);
  });

  it('flags overlapping validity windows', () => {
    expect(
      kinds([...section(0, 1, 100, 300, 490, 10), ...section(1, 1, 299, 310, 690, 11)]),
    ).toEqual(['overlap']);
  });

  it('accepts a section whose process was paused between grant and entry (empty window)', () => {
    // Seen in a run: worker 0 was granted token 120, then SIGSTOPped for 858 ms; its key expired,
    // workers 1 and 2 held the lock with tokens 121–129, and worker 0 resumed inside worker 2's
    // window. It entered with no validity left (signal aborted) and skipped its write.
    const events = [
      ...section(1, 1, 100, 150, 490, 121),
      ...section(2, 1, 200, 700, 1100, 129), // holds (extended) from 200 on
      ...section(0, 1, 680, 681, 680, 120, { aborted: true, write: 'skipped' }),
      ...section(1, 2, 1101, 1150, 1490, 130),
    ];
    const report = check(events, [], { value: 3, accepted: 3 });
    expect(report.violations).toEqual([]);
    expect(report.pastValidity).toBe(1);
    // ...but an entry with validity left inside another window still overlaps.
    expect(
      kinds([...section(2, 1, 200, 700, 1100, 129), ...section(0, 1, 680, 681, 690, 130)]),
    ).toEqual(['overlap']);
  });

  it('flags fencing tokens that do not strictly increase', () => {
    expect(
      kinds([...section(0, 1, 100, 150, 490, 10), ...section(1, 1, 200, 250, 590, 10)]),
    ).toEqual(['fencing']);
  });

  it('flags a holder that ran past its validity without its signal aborting', () => {
    expect(
      kinds([
        ...section(0, 1, 100, 600, 490, 10, { aborted: false }),
        ...section(1, 1, 700, 710, 1090, 11),
      ]),
    ).toEqual(['unaware']);
  });

  it('flags lost counter updates and sections without an exit record', () => {
    const events = [...section(0, 1, 100, 150, 490, 10), ...section(1, 1, 200, 250, 590, 11)];
    expect(kinds(events, [], { value: 1, accepted: 2 })).toEqual(['lost-update']);
    expect(
      kinds([...section(0, 1, 100, undefined, 490, 10)], [], { value: 0, accepted: 0 }),
    ).toEqual(['unfinished']);
  });

  it('attributes an overlap to the fault aimed at the first holder', () => {
    const fault: FaultEvent = {
      ev: 'fault',
      kind: 'restart-majority',
      t: 110,
      wall: 110,
      duration: 50,
      masters: [0, 1, 2],
      partitioned: [],
      worker: 0,
      seq: 1,
    };
    const events = [...section(0, 1, 100, 1300, 1480, 10), ...section(1, 1, 200, 250, 590, 11)];
    const report = check(events, [fault], { value: 1, accepted: 2 });
    expect(report.effective['restart-majority']).toBe(1);
    expect(report.breaches['restart-majority']).toBe(1);
  });
});

// Both waiting policies (the `fairness` setting): the fair one's installs write keys on behalf of
// another process — exactly what the checker watches.
describe.each(['local', 'across-processes'] as const)(
  'safety soak (5 masters, 3 worker processes, fault injection; fairness %s)',
  (fairness) => {
    // Each run starts 6 redis-servers and 3 ts-node worker processes: allow for a busy machine.
    it('keeps mutual exclusion, fencing order and lock-loss signals under faults (defaults)', async () => {
      const { report, dir, logsKept } = await runSoak({ durationMs: 20_000, workers: 3, fairness });
      show(`defaults, ${fairness}${logsKept ? ` (logs: ${dir})` : ''}`, formatReport(report));

      expect(report.violations).toEqual([]);
      expect(report.sections).toBeGreaterThanOrEqual(50);
      expect(report.counter?.accepted).toBeGreaterThanOrEqual(50);
      // Every fault kind was injected at least once (lists the kinds that were not).
      expect(Object.entries(report.faults).filter(([, n]) => n < 1)).toEqual([]);
      // The targeted faults hit: a majority restarted under a holder, a holder paused past its
      // validity while another worker took the lock, and that holder's signal told it.
      expect(report.effective['restart-majority']).toBeGreaterThanOrEqual(1);
      expect(report.effective['pause-holder']).toBeGreaterThanOrEqual(1);
      expect(report.pastValiditySuperseded).toBeGreaterThanOrEqual(1);
    }, 90_000);

    it('detects lost exclusion when the restart quarantine is off (broken variant)', async () => {
      // The faults land at random moments: a run in which no contender tried while a holder's keys
      // were gone shows nothing, and one whose overlapping sections did not interleave their
      // read-modify-write of the counter shows overlaps but no lost update (flake check: 7 overlaps,
      // 0 lost updates). Up to three short runs, until one shows both.
      const run = () =>
        runSoak({
          durationMs: 3_000,
          workers: 3,
          noQuarantine: true,
          faults: CRASH_RECOVERY_FAULTS,
          fairness,
        });
      const shows = (kind: string, r: Awaited<ReturnType<typeof run>>): boolean =>
        r.report.violations.some((v) => v.kind === kind);
      let result = await run();
      for (let i = 0; i < 2 && !(shows('overlap', result) && shows('lost-update', result)); i++) {
        rmSync(result.dir, { recursive: true, force: true });
        result = await run();
      }
      const { report, dir, logsKept } = result;
      show(
        `--no-quarantine, ${fairness}${logsKept ? ` (logs: ${dir})` : ''}`,
        formatReport(report, 3),
      );

      // A restart fault let a contender in while the holder's validity window was open, and the
      // non-atomic counter lost updates. Which of the two restart faults does it depends on when
      // the contenders try: they sleep until the holder's expiry or a release (no polling while it
      // is alive), so a fault that only empties the masters may pass before anyone tries.
      expect(
        (report.breaches['restart-majority'] ?? 0) +
          (report.breaches['bare-majority-restart'] ?? 0),
      ).toBeGreaterThanOrEqual(1);
      expect(report.violations.some((v) => v.kind === 'overlap')).toBe(true);
      expect(report.violations.some((v) => v.kind === 'lost-update')).toBe(true);
      rmSync(dir, { recursive: true, force: true }); // expected violations: nothing to inspect
    }, 120_000);
  },
);
