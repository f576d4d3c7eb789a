/**
 * Markdown tables of the benchmark: one table per scenario (every library's medians, the ratio to
 * the best other library and to the raw floor), the targets (targets.ts) with PASS/MISS, the
 * per-operation cost breakdown and the keyspace footprint.
 */
import { fmt, fmtRatio } from './stats';

/** Whose row it is in the tables. */
export type ContenderKind = 'ours' | 'other' | 'floor';

/** A library that could not be run here, and why. */
export interface Unavailable {
  readonly id: string;
  readonly label: string;
  readonly kind: ContenderKind;
  readonly reason: string;
}

/** Keys on one master grouped by `bench:<library>:` (or `lock:`) prefix, `fence:` counters apart. */
export interface Footprint {
  master: number;
  keys: number;
  usedMemoryMB: number;
  byPrefix: Record<string, number>;
}

/** Median-over-rounds metrics of one library in one scenario. */
export type Metrics = Record<string, number>;

/** One library's row. */
export interface Row {
  id: string;
  label: string;
  kind: ContenderKind;
  metrics: Metrics;
  /** Free text (warnings seen, commands per op, first error). */
  note?: string;
}

/** A scenario's rows. */
export interface ScenarioSummary {
  key: string;
  title: string;
  description: string;
  rows: Row[];
  unavailable: { id: string; label: string; reason: string }[];
}

/** Best value among the other libraries (not ours, not the floor); NaN when there is none. */
export function bestOther(
  sum: ScenarioSummary,
  metric: string,
  higher: boolean,
): { value: number; label: string } {
  let best: Row | undefined;
  for (const r of sum.rows) {
    if (r.kind !== 'other' || !Number.isFinite(r.metrics[metric])) continue;
    if (
      !best ||
      (higher ? r.metrics[metric] > best.metrics[metric] : r.metrics[metric] < best.metrics[metric])
    )
      best = r;
  }
  return best ? { value: best.metrics[metric], label: best.label } : { value: NaN, label: 'n/a' };
}

/** `metric` of the row `id`; NaN when missing. */
export function metricOf(sum: ScenarioSummary | undefined, id: string, metric: string): number {
  return sum?.rows.find((r) => r.id === id)?.metrics[metric] ?? NaN;
}

/** A column of a library table. */
export interface Column {
  head: string;
  metric: string;
  digits?: number;
  /** Add "vs best other" and "vs raw floor" columns for this metric (higher or lower is better). */
  compare?: 'higher' | 'lower';
}

/** The library table of one scenario. */
export function libraryTable(sum: ScenarioSummary, columns: Column[], withNote = false): string[] {
  const heads: string[] = ['library'];
  for (const c of columns) {
    heads.push(c.head);
    if (c.compare) heads.push(`${c.head} vs best other`, `${c.head} vs raw floor`);
  }
  if (withNote) heads.push('notes');
  const lines = [
    `| ${heads.join(' | ')} |`,
    `|---|${heads
      .slice(1)
      .map(() => '--:')
      .join('|')}|`,
  ];
  for (const r of sum.rows) {
    const cells = [r.label];
    for (const c of columns) {
      const v = r.metrics[c.metric];
      cells.push(fmt(v, c.digits ?? 0));
      if (c.compare) {
        const best = bestOther(sum, c.metric, c.compare === 'higher').value;
        cells.push(fmtRatio(v / best), fmtRatio(v / metricOf(sum, 'raw', c.metric)));
      }
    }
    if (withNote) cells.push(r.note ?? '');
    lines.push(`| ${cells.join(' | ')} |`);
  }
  const width = heads.length - 1;
  for (const u of sum.unavailable)
    lines.push(`| ${u.label} | ${u.reason} |${' |'.repeat(width - 1)}`);
  return lines;
}

/** One target, evaluated on the medians (bench/targets.ts). */
export interface Target {
  scenario: string;
  name: string;
  ours: string;
  reference: string;
  measured: string;
  floor: string;
  goal: string;
  pass: boolean | undefined;
}

/**
 * "row `id` ÷ best other ≥ / ≤ goal" for `metric` (`id`: our default row unless given; `ref`: a
 * library's id to compare with instead of the best other one).
 */
export function ratioTarget(
  sum: ScenarioSummary,
  name: string,
  metric: string,
  higher: boolean,
  goal: number,
  digits = 0,
  id = 'ours',
  ref?: string,
): Target {
  const ours = metricOf(sum, id, metric);
  const refRow = ref === undefined ? undefined : sum.rows.find((r) => r.id === ref);
  const best = refRow
    ? { value: refRow.metrics[metric] ?? NaN, label: refRow.label }
    : bestOther(sum, metric, higher);
  const ratio = ours / best.value;
  const floor = ours / metricOf(sum, 'raw', metric);
  return {
    scenario: sum.title,
    name,
    ours: fmt(ours, digits),
    reference: `${fmt(best.value, digits)} (${best.label})`,
    measured: fmtRatio(ratio),
    floor: fmtRatio(floor),
    goal: `${higher ? '≥' : '≤'} ${goal.toFixed(2)}×`,
    pass: Number.isFinite(ratio) ? (higher ? ratio >= goal : ratio <= goal) : undefined,
  };
}

/** An absolute target on our row `id` (the default row unless given): `metric` ≤ / ≥ `goal`. */
export function absoluteTarget(
  sum: ScenarioSummary,
  name: string,
  metric: string,
  atMost: boolean,
  goal: number,
  unit: string,
  digits = 0,
  reference = '',
  id = 'ours',
): Target {
  const ours = metricOf(sum, id, metric);
  return {
    scenario: sum.title,
    name,
    ours: `${fmt(ours, digits)}${unit}`,
    reference,
    measured: `${fmt(ours, digits)}${unit}`,
    floor: '',
    goal: `${atMost ? '≤' : '≥'} ${fmt(goal, digits)}${unit}`,
    pass: Number.isFinite(ours) ? (atMost ? ours <= goal : ours >= goal) : undefined,
  };
}

/** The target lines of one scenario. */
export function targetTable(targets: Target[], withScenario = false): string[] {
  const lines = [
    `| ${withScenario ? 'scenario | ' : ''}target | ours | best other library (or reference) | ours ÷ best other | ours ÷ raw floor | goal | result |`,
    `|${withScenario ? '---|' : ''}---|--:|--:|--:|--:|--:|---|`,
  ];
  for (const t of targets) {
    const result = t.pass === undefined ? 'n/a' : t.pass ? 'PASS' : '**MISS**';
    lines.push(
      `| ${withScenario ? `${t.scenario} | ` : ''}${t.name} | ${t.ours} | ${t.reference} | ${t.measured} | ${t.floor} | ${t.goal} | ${result} |`,
    );
  }
  return lines;
}

/** Keys left on the masters at the end of the run, by prefix (min–max over masters). */
export function footprintTable(fp: Footprint[]): string[] {
  if (fp.length === 0) return [];
  const prefixes = new Set<string>();
  for (const f of fp) for (const p of Object.keys(f.byPrefix)) prefixes.add(p);
  const range = (vals: number[], digits = 0): string => {
    const lo = Math.min(...vals);
    const hi = Math.max(...vals);
    return lo === hi ? fmt(lo, digits) : `${fmt(lo, digits)}–${fmt(hi, digits)}`;
  };
  const lines = ['| key prefix | keys on each master |', '|---|--:|'];
  for (const p of [...prefixes].sort())
    lines.push(`| \`${p}\` | ${range(fp.map((f) => f.byPrefix[p] ?? 0))} |`);
  lines.push(`| **all keys** (DBSIZE) | ${range(fp.map((f) => f.keys))} |`);
  lines.push(
    `| used_memory MB | ${range(
      fp.map((f) => f.usedMemoryMB),
      1,
    )} |`,
  );
  return lines;
}
