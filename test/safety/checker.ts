/**
 * Safety soak checker: reads the worker and fault logs of a run and verifies
 *
 * 1. mutual exclusion within validity (REDLOCK.md, "Properties we promise" 1): no two critical
 *    sections overlap on [start, min(end, validityEnd, abortedAt)] — a holder holds from its
 *    entry until it left, its validity ended or its signal told it the lock was lost, whichever
 *    came first (issue 53: "B is refused or A's signal aborted before B's grant"); a section that
 *    starts past its validity end, its process paused between grant and routine, has an empty
 *    window: it never held;
 * 2. fencing: tokens strictly increase in acquisition (start) order among the sections that held;
 * 3. lock-loss signal: a section that ran past its validity end saw `lock.signal` aborted
 *    (REDLOCK.md, "Clocks": a paused holder must learn that its lock ended);
 * 4. the counter (lost updates): every write the data server accepted is in the final value — the
 *    sections' read-modify-write is not atomic, so two holders at once lose an update;
 * 5. fenced writes: in the data server's own order (recorded through MONITOR), every write that
 *    `fencedWrite` accepted carries a token greater than every write accepted before it (0 stale
 *    writes accepted); no write is refused whose token is above every accepted one; every write a
 *    worker saw accepted is in that record.
 *
 * Usable as a library (`checkRun`) and from the CLI (`cli.ts --check <dir>`).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  EnterEvent,
  ExitEvent,
  FAULT_KINDS,
  FaultEvent,
  FaultKind,
  WorkerEvent,
  WriteOutcome,
} from './protocol';

/** Faults aimed at one holder's critical section. */
export type TargetedFault =
  'restart-majority' | 'bare-majority-restart' | 'pause-holder' | 'clock-jump' | 'clock-jump-back';

const TARGETED: readonly TargetedFault[] = [
  'restart-majority',
  'bare-majority-restart',
  'pause-holder',
  'clock-jump',
  'clock-jump-back',
];

/** One write the fenced resource accepted (controller.ts, from MONITOR), in the server's order. */
export interface FencedRecord {
  readonly token: number;
  /** `worker:seq` of the section that wrote. */
  readonly value: string;
}

/** The fenced writes of a run (rule 5). */
export interface FencedReport {
  /** Sections that made a fenced write. */
  readonly attempts: number;
  /** Writes the data server accepted (its own record). */
  readonly accepted: number;
  /** Writes `fencedWrite` refused (worker logs). */
  readonly refused: number;
  readonly errors: number;
  /** Accepted writes whose token was not above every token accepted before (must be 0). */
  readonly staleAccepted: number;
  /** Refused writes made after the section's lock ended (aborted or past validity). */
  readonly lateRefused: number;
  /** Accepted writes made after the section's lock ended (no newer holder had written yet). */
  readonly lateAccepted: number;
}

/** One critical section, from its enter and (if written) exit lines. */
export interface Section {
  readonly enter: EnterEvent;
  readonly exit: ExitEvent | undefined;
}

/** A broken property, with the evidence. */
export interface Violation {
  readonly kind:
    | 'overlap'
    | 'fencing'
    | 'unaware'
    | 'lost-update'
    | 'unfinished'
    | 'stale-write'
    | 'fenced-refused'
    | 'fenced-record';
  readonly message: string;
  /** Sections involved (`worker:seq`), earliest first. */
  readonly sections?: readonly string[];
}

/** Final state of the counter server. */
export interface CounterState {
  /** Final counter value. */
  readonly value: number;
  /** Writes the server accepted. */
  readonly accepted: number;
}

/** What a run did and what the checker found. */
export interface CheckReport {
  readonly sections: number;
  readonly sectionsByMode: Readonly<Record<string, number>>;
  readonly writes: Readonly<Record<WriteOutcome, number>>;
  readonly extensions: number;
  readonly extendErrors: number;
  /** Sections that ran past their validity end (paused holders, late finishers). */
  readonly pastValidity: number;
  /** Of those, how many learned it through the abort event before the section ended. */
  readonly pastValidityAbortEvent: number;
  readonly acquireFailures: Readonly<Record<string, number>>;
  readonly faults: Readonly<Record<FaultKind, number>>;
  /**
   * Targeted faults that hit their mark: a `restart-majority` or `bare-majority-restart` whose
   * masters were back up while the targeted holder's validity window was still open (REDLOCK.md,
   * "Crash recovery"), a `pause-holder` whose holder was still stopped when its validity ended.
   */
  readonly effective: Readonly<Record<TargetedFault, number>>;
  /** Targeted faults whose holder's validity window was overlapped by another section. */
  readonly breaches: Readonly<Record<TargetedFault, number>>;
  /** Past-validity sections during which another worker entered (the lock had moved on). */
  readonly pastValiditySuperseded: number;
  readonly counter: CounterState | undefined;
  /** Updates lost: writes the data server accepted that are not in the counter's final value. */
  readonly lostUpdates: number;
  /** The fenced writes, when their record was read. */
  readonly fenced: FencedReport | undefined;
  /** Fencing tokens of the sections that held: how many, the first and the last. */
  readonly tokens: {
    readonly count: number;
    readonly first: number | null;
    readonly last: number | null;
  };
  /** Probe attempts after clock faults: `granted` or the refusal's error name, with counts. */
  readonly probes: Readonly<Record<string, number>>;
  /**
   * The engines' warnings, by kind: `clock-jumped` (a master's clock moved against the engine's
   * monotonic clock), `clock-off` (at first contact, off the other masters'), `other`.
   */
  readonly warnings: Readonly<Record<string, number>>;
  readonly violations: readonly Violation[];
  /** Longest overlap found (ms), 0 when none. */
  readonly maxOverlap: number;
}

/** Reads a JSON-lines file (ignores a torn last line of a killed process). */
export function readJsonLines<T>(file: string): T[] {
  const out: T[] = [];
  const lines = readFileSync(file, 'utf8').split('\n');
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    try {
      out.push(JSON.parse(line) as T);
    } catch (err) {
      if (i < lines.length - 1 && lines.slice(i + 1).some((l) => l.trim() !== '')) throw err;
    }
  });
  return out;
}

/**
 * Reads every `worker-*.jsonl`, `faults.jsonl`, `counter.json` (the counter server's final
 * state) and `fenced.jsonl` (the accepted fenced writes, in the server's order) of a run
 * directory and checks them.
 */
export function checkRun(dir: string): CheckReport {
  let counter: CounterState | undefined;
  try {
    counter = JSON.parse(readFileSync(join(dir, 'counter.json'), 'utf8')) as CounterState;
  } catch {
    counter = undefined;
  }
  // The record is complete once counter.json exists (the controller writes it after the
  // workers stopped and MONITOR caught up); a run that never wrote one has no fenced check.
  let fenced: FencedRecord[] | undefined;
  if (counter) {
    try {
      fenced = readJsonLines<FencedRecord>(join(dir, 'fenced.jsonl'));
    } catch {
      fenced = []; // no write was ever accepted
    }
  }
  const events: WorkerEvent[] = [];
  for (const f of readdirSync(dir)
    .filter((n) => /^worker-\d+\.jsonl$/.test(n))
    .sort()) {
    events.push(...readJsonLines<WorkerEvent>(join(dir, f)));
  }
  let faults: FaultEvent[] = [];
  try {
    faults = readJsonLines<FaultEvent>(join(dir, 'faults.jsonl'));
  } catch {
    faults = [];
  }
  return check(events, faults, counter, fenced);
}

/**
 * Checks the logged events of one run; `fenced`: the accepted fenced writes in the data server's
 * order (rule 5 is skipped without it).
 */
export function check(
  events: readonly WorkerEvent[],
  faults: readonly FaultEvent[],
  counter?: CounterState,
  fenced?: readonly FencedRecord[],
): CheckReport {
  const enters = new Map<string, EnterEvent>();
  const exits = new Map<string, ExitEvent>();
  const acquireFailures: Record<string, number> = {};
  const probes: Record<string, number> = {};
  const warnings: Record<string, number> = {};
  for (const e of events) {
    if (e.ev === 'probe') {
      probes[e.outcome] = (probes[e.outcome] ?? 0) + 1;
      continue;
    }
    if (e.ev === 'warn') {
      const kind = /clock jumped/.test(e.message)
        ? 'clock-jumped'
        : /clock is .* (ahead of|behind) the other masters/.test(e.message)
          ? 'clock-off'
          : 'other';
      warnings[kind] = (warnings[kind] ?? 0) + 1;
      continue;
    }
    const id = `${e.worker}:${'seq' in e ? e.seq : ''}`;
    if (e.ev === 'enter') enters.set(id, e);
    else if (e.ev === 'exit') exits.set(id, e);
    else acquireFailures[e.error] = (acquireFailures[e.error] ?? 0) + 1;
  }
  const sections: Section[] = [...enters.entries()]
    .map(([id, enter]) => ({ enter, exit: exits.get(id) }))
    .sort((a, b) => a.enter.start - b.enter.start);

  const violations: Violation[] = [];
  const idOf = (s: Section): string => `${s.enter.worker}:${s.enter.seq}`;
  const describe = (s: Section): string =>
    `worker ${s.enter.worker} #${s.enter.seq} (${s.enter.mode}, token ${s.enter.fencingToken}, masters ${s.enter.okMasters.join(',')})`;
  // A section's window: entry until it ended, its validity ended or its signal aborted (it was
  // told the lock was lost), whichever came first.
  const windowEnd = (s: Section): number =>
    Math.min(
      s.exit?.end ?? Infinity,
      s.exit?.validityEnd ?? s.enter.validityEnd,
      s.exit?.abortedAt ?? Infinity,
    );

  // A section whose validity had already ended when it started (its process was paused between
  // the grant and the routine) never held the resource: its window is empty, its signal was
  // aborted on entry and it wrote nothing. It cannot overlap anything, and its token — drawn
  // at the grant, before the pause — says nothing about the order of the sections that held.
  // Whatever it did all the same is still judged by rules 3 and 4.
  const held = (s: Section): boolean => windowEnd(s) > s.enter.start;

  // 1. Mutual exclusion: sweep in start order, comparing with every earlier window still open.
  let maxOverlap = 0;
  const open: Section[] = [];
  for (const s of sections) {
    if (!held(s)) continue;
    for (let i = open.length - 1; i >= 0; i--) {
      const o = open[i];
      const overlap = Math.min(windowEnd(o), windowEnd(s)) - s.enter.start;
      if (overlap > 0) {
        maxOverlap = Math.max(maxOverlap, overlap);
        violations.push({
          kind: 'overlap',
          message: `${describe(s)} entered inside the window of ${describe(o)}, ${(s.enter.start - o.enter.start).toFixed(1)} ms after it: ${overlap.toFixed(1)} ms of overlap`,
          sections: [idOf(o), idOf(s)],
        });
      } else {
        open.splice(i, 1);
      }
    }
    open.push(s);
  }

  // 2. Fencing tokens strictly increase in acquisition order (among the sections that held).
  const holding = sections.filter(held);
  for (let i = 1; i < holding.length; i++) {
    const prev = holding[i - 1].enter.fencingToken;
    const cur = holding[i].enter.fencingToken;
    if (prev === null || cur === null || !(cur > prev)) {
      violations.push({
        kind: 'fencing',
        message: `${describe(holding[i])} got token ${cur} after ${describe(holding[i - 1])}`,
      });
    }
  }

  // 3. Past its validity, a holder must see its signal aborted.
  let pastValidity = 0;
  let pastValidityAbortEvent = 0;
  let pastValiditySuperseded = 0;
  for (const s of sections) {
    if (!s.exit) {
      violations.push({ kind: 'unfinished', message: `${describe(s)} has no exit record` });
      continue;
    }
    if (s.exit.end > s.exit.validityEnd) {
      pastValidity++;
      if (s.exit.abortedAt !== null) pastValidityAbortEvent++;
      const exit = s.exit;
      if (sections.some((o) => o.enter.start > exit.validityEnd && o.enter.start < exit.end)) {
        pastValiditySuperseded++;
      }
      if (!s.exit.aborted) {
        violations.push({
          kind: 'unaware',
          message: `${describe(s)} ended ${(s.exit.end - s.exit.validityEnd).toFixed(1)} ms past its validity but its signal did not abort`,
        });
      }
    }
  }

  // 4. Counter: accepted writes all survive. Each section whose write the server accepted is one
  // completed critical section (the server counts them; the workers' logs cannot count more).
  const completed = sections.filter((s) => s.exit?.write === 'ok').length;
  const lostUpdates = counter
    ? Math.max(0, Math.max(counter.accepted, completed) - counter.value)
    : 0;
  if (counter && counter.value !== counter.accepted) {
    violations.push({
      kind: 'lost-update',
      message: `the counter server accepted ${counter.accepted} writes but the counter is ${counter.value}: ${counter.accepted - counter.value} update(s) lost`,
    });
  } else if (counter && counter.value < completed) {
    violations.push({
      kind: 'lost-update',
      message: `${completed} sections saw their counter write accepted but the counter is ${counter.value}`,
    });
  }

  // 5. Fenced writes, in the data server's order.
  let fencedReport: FencedReport | undefined;
  if (fenced) {
    let staleAccepted = 0;
    let highest = -Infinity;
    const acceptedBy = new Set<string>();
    for (const r of fenced) {
      acceptedBy.add(r.value);
      if (!(r.token > highest)) {
        staleAccepted++;
        const s = byIdOf(sections, r.value);
        violations.push({
          kind: 'stale-write',
          message: `the fenced resource accepted token ${r.token} (${s ? describe(s) : r.value}) after token ${highest}`,
        });
      }
      highest = Math.max(highest, r.token);
    }
    let attempts = 0;
    let refused = 0;
    let errors = 0;
    let lateRefused = 0;
    let lateAccepted = 0;
    for (const s of sections) {
      const x = s.exit;
      if (!x || x.fenced === undefined || x.fenced === 'none') continue;
      attempts++;
      const late =
        x.fencedAt !== null &&
        (x.fencedAt > x.validityEnd || (x.abortedAt !== null && x.fencedAt > x.abortedAt));
      if (x.fenced === 'error') errors++;
      if (x.fenced === 'refused') {
        refused++;
        if (late) lateRefused++;
        if (s.enter.fencingToken !== null && s.enter.fencingToken > highest) {
          violations.push({
            kind: 'fenced-refused',
            message: `fencedWrite refused ${describe(s)} although no accepted write had a token as high`,
          });
        }
      }
      if (x.fenced === 'accepted') {
        if (late) lateAccepted++;
        if (!acceptedBy.has(idOf(s))) {
          violations.push({
            kind: 'fenced-record',
            message: `${describe(s)} saw its fenced write accepted, but the data server's record does not have it`,
          });
        }
      }
    }
    fencedReport = {
      attempts,
      accepted: fenced.length,
      refused,
      errors,
      staleAccepted,
      lateRefused,
      lateAccepted,
    };
  }

  const writes: Record<WriteOutcome, number> = { ok: 0, skipped: 0, refused: 0, error: 0 };
  const sectionsByMode: Record<string, number> = {};
  let extensions = 0;
  let extendErrors = 0;
  for (const s of sections) {
    sectionsByMode[s.enter.mode] = (sectionsByMode[s.enter.mode] ?? 0) + 1;
    if (!s.exit) continue;
    writes[s.exit.write]++;
    extensions += s.exit.extensions;
    if (s.exit.extendError) extendErrors++;
  }
  const faultCounts = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<
    FaultKind,
    number
  >;
  for (const f of faults) faultCounts[f.kind]++;
  const byId = new Map(sections.map((s) => [idOf(s), s]));
  const overlapped = new Set(
    violations.filter((v) => v.kind === 'overlap').map((v) => v.sections?.[0]),
  );
  const effective = Object.fromEntries(TARGETED.map((k) => [k, 0])) as Record<
    TargetedFault,
    number
  >;
  const breaches = { ...effective };
  for (const f of faults) {
    const kind = f.kind as TargetedFault;
    if (!TARGETED.includes(kind)) continue;
    const id = `${f.worker}:${f.seq}`;
    const target = byId.get(id);
    if (!target) continue;
    // pause-holder: paused past its validity; restarts: masters back up inside the holder's
    // window; clock faults: the clock moved while the holder held (f.t is the jump).
    const hit =
      kind === 'pause-holder'
        ? target.exit !== undefined && target.exit.end > target.exit.validityEnd
        : kind === 'clock-jump' || kind === 'clock-jump-back'
          ? windowEnd(target) > f.t
          : windowEnd(target) > f.t + f.duration;
    if (hit) effective[kind]++;
    if (overlapped.has(id)) breaches[kind]++;
  }
  const tokenList = holding.map((s) => s.enter.fencingToken).filter((t): t is number => t !== null);

  return {
    sections: sections.length,
    sectionsByMode,
    writes,
    extensions,
    extendErrors,
    pastValidity,
    pastValidityAbortEvent,
    acquireFailures,
    faults: faultCounts,
    effective,
    breaches,
    pastValiditySuperseded,
    counter,
    lostUpdates,
    fenced: fencedReport,
    tokens: {
      count: tokenList.length,
      first: tokenList[0] ?? null,
      last: tokenList[tokenList.length - 1] ?? null,
    },
    probes,
    warnings,
    violations,
    maxOverlap,
  };
}

function byIdOf(sections: readonly Section[], id: string): Section | undefined {
  return sections.find((s) => `${s.enter.worker}:${s.enter.seq}` === id);
}

/** Human-readable summary of a report (at most `maxViolations` violations listed). */
export function formatReport(r: CheckReport, maxViolations = 10): string {
  const kv = (o: Readonly<Record<string, number>>): string =>
    Object.entries(o)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ') || '-';
  const byKind: Record<string, number> = {};
  for (const v of r.violations) byKind[v.kind] = (byKind[v.kind] ?? 0) + 1;
  const overlaps = r.violations.filter((v) => v.kind === 'overlap').length;
  const f = r.fenced;
  const lines = [
    `overlaps:          ${overlaps}${overlaps ? ` (max ${r.maxOverlap.toFixed(1)} ms)` : ''}`,
    `lost updates:      ${r.counter ? r.lostUpdates : 'not checked (counter not read)'}`,
    `stale fenced writes accepted: ${f ? f.staleAccepted : 'not checked (no record)'}`,
    `fencing tokens:    ${r.tokens.count} held sections, ${r.tokens.first ?? '-'} … ${r.tokens.last ?? '-'}, ${r.violations.filter((v) => v.kind === 'fencing').length} not strictly increasing`,
    `critical sections: ${r.sections} (${kv(r.sectionsByMode)})`,
    `counter writes:    ${kv(r.writes)}; extensions ok=${r.extensions} failed=${r.extendErrors}`,
    `counter:           ${r.counter ? `value=${r.counter.value} accepted=${r.counter.accepted}` : 'not read'}`,
    `fenced writes:     ${f ? `${f.attempts} made: accepted=${f.accepted} refused=${f.refused} error=${f.errors}; after the lock ended: ${f.lateRefused} refused, ${f.lateAccepted} accepted (no newer holder had written)` : 'not checked'}`,
    `probes:            ${kv(r.probes)}`,
    `engine warnings:   ${kv(r.warnings)}`,
    `past validity:     ${r.pastValidity} section(s): ${r.pastValidityAbortEvent} told by the abort event before they ended, ${r.pastValiditySuperseded} while another worker already held the lock`,
    `acquire failures:  ${kv(r.acquireFailures)}`,
    `faults injected:   ${kv(r.faults)}`,
    `faults on target:  ${kv(r.effective)} (masters back up / clock moved inside the holder's window; holder paused past it)`,
    `...that broke it:  ${kv(r.breaches)} (another section entered inside the holder's validity)`,
    `violations:        ${r.violations.length}${r.violations.length ? ` (${kv(byKind)}; max overlap ${r.maxOverlap.toFixed(1)} ms)` : ''}`,
    ...r.violations.slice(0, maxViolations).map((v) => `  - [${v.kind}] ${v.message}`),
  ];
  if (r.violations.length > maxViolations)
    lines.push(`  ... and ${r.violations.length - maxViolations} more`);
  return lines.join('\n');
}
