/**
 * The benchmark's files (bench/*.ts) import one another one way: no circle (the runner imports
 * its topology, targets and report renderer, which share bench/options.ts instead of importing
 * the runner back). Read from the sources, as test/unit/core/layers.spec.ts reads lib/core.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join, normalize } from 'node:path';
import { repoPath } from '../harness/paths';

const BENCH = repoPath('bench');
const files = readdirSync(BENCH).filter((name) => name.endsWith('.ts'));

/** The bench files `file` imports (static imports and re-exports, types included). */
function importsOf(file: string): string[] {
  const text = readFileSync(join(BENCH, file), 'utf8');
  const found: string[] = [];
  for (const m of text.matchAll(
    /^(?:(?:import|export)\b[^;]*?\bfrom\s+|import\s+)'(\.[^']*)'/gms,
  )) {
    const target = normalize(m[1]);
    if (target.startsWith('..')) continue; // outside bench/
    const hit = `${target}.ts`;
    if (!files.includes(hit)) throw new Error(`bench/${file}: cannot resolve '${m[1]}'`);
    found.push(hit);
  }
  return found;
}

const graph = new Map(files.map((f) => [f, importsOf(f)]));

describe('bench imports', () => {
  it('the check sees the runner import its parts', () => {
    expect(graph.get('run.ts')).toEqual(expect.arrayContaining(['topology.ts', 'render.ts']));
  });

  it('has no import circle', () => {
    const circles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const path: string[] = [];
    const visit = (f: string): void => {
      state.set(f, 'open');
      path.push(f);
      for (const t of graph.get(f) ?? []) {
        if (state.get(t) === 'open') circles.push([...path.slice(path.indexOf(t)), t].join(' -> '));
        else if (!state.has(t)) visit(t);
      }
      path.pop();
      state.set(f, 'done');
    };
    for (const f of files) if (!state.has(f)) visit(f);
    expect(circles).toEqual([]);
  });
});
