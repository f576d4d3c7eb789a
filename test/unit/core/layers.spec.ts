/**
 * The engine's floors (docs/architecture.md): every import in lib/core goes down a floor or
 * sideways, never up, and no files import each other in a circle. Read from the sources, so a
 * new file must be given its floor here.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { repoPath } from '../../harness/paths';

const CORE = repoPath('lib', 'core');

/** The floor of a file (path relative to lib/core), lowest first; docs/architecture.md. */
function floorOf(file: string): number {
  const [top] = file.split('/');
  if (file === 'redlock.ts' || file === 'index.ts') return 7; // engine facade
  if (top === 'fair') return 6; // the fair mode (opt-in)
  if (top === 'policy' || ['lock.ts', 'portable.ts', 'events.ts'].includes(file)) {
    return 5; // policy
  }
  if (/^(redis-|install-)/.test(file) || file === 'repair.ts') return 4; // the Redis store
  if (file === 'store.ts') return 3.5; // the store seam, below the stores that implement it
  if (top === 'quorum' || top === 'kinds') return 3; // protocol and lock kinds
  if (top === 'masters') return 2; // masters
  const basics = [
    'connection',
    'scripts',
    'errors.ts',
    'settings.ts',
    'validate.ts',
    'keys.ts',
    'clock.ts',
    'redact.ts',
    'kind-spec.ts',
    'types.ts',
    'wake.ts',
    'announcements.ts',
    'fields.ts',
    'token.ts',
    'replies.ts',
    'fencing.ts',
    'disposable.ts',
  ];
  if (basics.includes(top)) return 1;
  throw new Error(`lib/core/${file} has no floor: give it one in test/unit/core/layers.spec.ts`);
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith('.ts') ? [relative(CORE, path)] : [];
  });
}

/** The lib/core files `file` imports (static imports and re-exports, types included). */
function importsOf(file: string): string[] {
  const text = readFileSync(join(CORE, file), 'utf8');
  const found: string[] = [];
  // `import … from './x'`, `export … from './x'`, and side-effect imports (`import './x'`).
  for (const m of text.matchAll(
    /^(?:(?:import|export)\b[^;]*?\bfrom\s+|import\s+)'(\.[^']*)'/gms,
  )) {
    const target = normalize(join(dirname(file), m[1]));
    if (target.startsWith('..')) continue; // outside lib/core
    const candidates = [`${target}.ts`, join(target, 'index.ts')];
    const hit = candidates.find((c) => files.includes(c));
    if (!hit) throw new Error(`${file}: cannot resolve '${m[1]}'`);
    found.push(hit);
  }
  return found;
}

const files = sources(CORE);
const graph = new Map(files.map((f) => [f, importsOf(f)]));

describe('lib/core floors', () => {
  it('every file has a floor, and no import goes up a floor', () => {
    for (const f of files) floorOf(f);
    const up = [...graph].flatMap(([file, targets]) =>
      targets
        .filter((t) => floorOf(t) > floorOf(file))
        .map((t) => `${file} (${floorOf(file)}) -> ${t} (${floorOf(t)})`),
    );
    expect(up).toEqual([]);
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

  it('the check itself sees imports (the facade imports the policy)', () => {
    expect(graph.get('redlock.ts')?.length).toBeGreaterThan(5);
    expect(floorOf('redlock.ts')).toBeGreaterThan(floorOf('store.ts'));
  });
});
