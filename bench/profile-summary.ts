/**
 * Per-operation summary of a V8 CPU profile (the `.cpuprofile` JSON that `node --cpu-prof` and
 * the inspector's `Profiler.stop` write): sampled time per operation, by function and by file,
 * self and inclusive. Used by `bench/profile.ts` on a profile of the measured window only.
 *
 * Self time is the time of the samples whose innermost frame is the function. Inclusive time,
 * kept for the project's `lib/` functions only, counts a sample once for every distinct such
 * function on its stack (a recursing function once).
 * `(idle)` (the event loop waiting) and `writeUtf8String` (the socket write, native; on a
 * 2-core machine it can also hold time the writer spent preempted by the master it woke) are
 * reported on their own and left out of `jsUsPerOp` ("the rest"): they are not JavaScript work.
 * A function's row is `<name> <file>`, without a line number (under ts-node the profile's lines
 * are those of the emitted JavaScript, not of the `.ts` source): same-named functions of one file
 * — its anonymous closures, say — share one row.
 */

/** The parts of a `.cpuprofile` read here. */
export interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    children?: number[];
  }[];
  samples: number[];
  timeDeltas: number[];
}

/** One row: a function or file and its sampled time per operation (µs). */
export interface CostRow {
  readonly name: string;
  readonly usPerOp: number;
}

/** What {@link summarizeProfile} finds. */
export interface ProfileSummary {
  /** All sampled time per operation (µs), idle included. */
  readonly totalUsPerOp: number;
  /** `(idle)` per operation (µs). */
  readonly idleUsPerOp: number;
  /** Socket writes (`writeUtf8String`) per operation (µs). */
  readonly writeUsPerOp: number;
  /** The rest: JavaScript, GC and native calls other than the socket write (µs per op). */
  readonly jsUsPerOp: number;
  /** Self time by function, largest first. */
  readonly selfByFunction: readonly CostRow[];
  /** Self time by file (`node_modules/<package>`, `lib/...`, or the native function's name). */
  readonly selfByFile: readonly CostRow[];
  /** Inclusive time of the functions in the project's `lib/`, largest first. */
  readonly inclusiveLib: readonly CostRow[];
}

const IDLE = '(idle)';
const WRITE = 'writeUtf8String';

/** A frame's file, shortened: `node_modules/<pkg>/...` → `node_modules/<pkg>`, else from `lib/`. */
function fileOf(url: string): string {
  const m = /(node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (m) return m[1];
  const i = url.lastIndexOf('/lib/');
  return i >= 0 ? url.slice(i + 1) : url.replace(/^file:\/\//, '');
}

function frameName(f: CpuProfile['nodes'][number]['callFrame']): string {
  const file = fileOf(f.url);
  return file ? `${f.functionName || '(anonymous)'} ${file}` : f.functionName || '(anonymous)';
}

function rows(m: Map<string, number>, ops: number): CostRow[] {
  return [...m]
    .map(([name, us]) => ({ name, usPerOp: us / ops }))
    .sort((a, b) => b.usPerOp - a.usPerOp);
}

function add(m: Map<string, number>, k: string, us: number): void {
  m.set(k, (m.get(k) ?? 0) + us);
}

/** Summarizes `profile` over `ops` operations (see the file's comment). */
export function summarizeProfile(profile: CpuProfile, ops: number): ProfileSummary {
  if (!(ops > 0)) throw new Error(`ops must be positive, got ${ops}`);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfOfNode = new Map<number, number>();
  // The first delta is the time from the profiler's start to its first sample, not a sample's
  // (the inspector's round trips, up to hundreds of ms): left out.
  profile.samples.forEach((id, i) => {
    if (i > 0) selfOfNode.set(id, (selfOfNode.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const selfFn = new Map<string, number>();
  const selfFile = new Map<string, number>();
  const incl = new Map<string, number>();
  let total = 0;
  let idle = 0;
  let write = 0;
  for (const [id, us] of selfOfNode) {
    const node = byId.get(id);
    if (!node) continue;
    total += us;
    const fn = node.callFrame.functionName;
    if (fn === IDLE) idle += us;
    else if (fn === WRITE) write += us;
    add(selfFn, frameName(node.callFrame), us);
    add(selfFile, fileOf(node.callFrame.url) || fn || '(anonymous)', us);
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)?.callFrame;
      if (!f || !fileOf(f.url).startsWith('lib/')) continue;
      const name = frameName(f);
      if (seen.has(name)) continue;
      seen.add(name);
      add(incl, name, us);
    }
  }
  return {
    totalUsPerOp: total / ops,
    idleUsPerOp: idle / ops,
    writeUsPerOp: write / ops,
    jsUsPerOp: (total - idle - write) / ops,
    selfByFunction: rows(selfFn, ops),
    selfByFile: rows(selfFile, ops),
    inclusiveLib: rows(incl, ops),
  };
}

/** The summary as text: totals, then the `top` largest rows of each table. */
export function formatSummary(s: ProfileSummary, top = 25): string {
  const table = (title: string, r: readonly CostRow[]): string[] => [
    `${title} (µs per op)`,
    ...r.slice(0, top).map((x) => `${x.usPerOp.toFixed(2).padStart(9)}  ${x.name}`),
  ];
  return [
    `sampled ${s.totalUsPerOp.toFixed(1)} µs per op: idle ${s.idleUsPerOp.toFixed(1)}, ` +
      `socket writes ${s.writeUsPerOp.toFixed(1)}, the rest ${s.jsUsPerOp.toFixed(1)}`,
    ...table('self, by file', s.selfByFile),
    ...table('self, by function', s.selfByFunction),
    ...table("inclusive, the project's lib/", s.inclusiveLib),
  ].join('\n');
}
