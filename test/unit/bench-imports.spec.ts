/**
 * The benchmark's files (bench/*.ts) import one another one way: no circle (the runner imports
 * its topology, targets and report renderer, which share bench/options.ts instead of importing
 * the runner back). Read from the sources, as test/unit/core/layers.spec.ts reads lib/core.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join, normalize } from 'node:path';
import { importCircles } from '../harness/import-graph';
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
    expect(importCircles(graph)).toEqual([]);
  });
});
