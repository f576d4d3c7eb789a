/**
 * The engine's floors (docs/architecture.md): lib/core is laid out as folders, one floor each, and
 * every import goes down a floor or stays inside its folder; no files import each other in a
 * circle. Read from the sources, so a new folder must be given its row here.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { importCircles } from '../../harness/import-graph';
import { repoPath } from '../../harness/paths';

const CORE = repoPath('lib', 'core');

/**
 * What each part of lib/core may import besides itself, lowest first. `policy/`, `waiting/`,
 * `lock/`, `quorum/` and `base/` never import `redis/`, and the Redis wing (below the store seam,
 * beside the policy) never imports the lock model, the waiting seam or the operations.
 */
const MAY_IMPORT: Record<string, readonly string[]> = {
  base: [],
  quorum: ['base'],
  'store.ts': ['base', 'quorum'],
  lock: ['base', 'quorum', 'store.ts'],
  waiting: ['base', 'quorum', 'store.ts', 'lock'],
  policy: ['base', 'quorum', 'store.ts', 'lock', 'waiting'],
  redis: ['base', 'quorum', 'store.ts'],
  fair: ['base', 'quorum', 'store.ts', 'lock', 'waiting', 'redis'],
  'redlock.ts': ['base', 'quorum', 'store.ts', 'lock', 'waiting', 'policy', 'redis', 'fair'],
  'index.ts': ['base', 'quorum', 'lock', 'redis', 'redlock.ts'],
};

/** Inside the Redis wing, the same rule one level down: what each of its folders may import. */
const REDIS_MAY_IMPORT: Record<string, readonly string[]> = {
  connection: [],
  scripts: ['connection'],
  kinds: ['scripts'],
  masters: ['connection', 'scripts'],
  '(files)': ['connection', 'scripts', 'kinds', 'masters'],
};

/** The part of lib/core a file (path relative to lib/core) belongs to. */
function partOf(file: string): string {
  const [top] = file.split('/');
  if (top in MAY_IMPORT) return top;
  throw new Error(`lib/core/${file} is in no part: give its folder a row in layers.spec.ts`);
}

/** The Redis wing's part of a file of redis/ (a folder, or its files at its root). */
function redisPartOf(file: string): string {
  const parts = file.split('/');
  const part = parts.length > 2 ? parts[1] : '(files)';
  if (part in REDIS_MAY_IMPORT) return part;
  throw new Error(`lib/core/${file}: give redis/${part} a row in layers.spec.ts`);
}

/** Why `file` may not import `target`, or undefined when it may. */
function violation(file: string, target: string): string | undefined {
  const from = partOf(file);
  const to = partOf(target);
  if (from !== to) {
    return MAY_IMPORT[from].includes(to) ? undefined : `${file} (${from}) -> ${target} (${to})`;
  }
  if (from !== 'redis') return undefined;
  const [a, b] = [redisPartOf(file), redisPartOf(target)];
  return a === b || REDIS_MAY_IMPORT[a].includes(b)
    ? undefined
    : `${file} (redis/${a}) -> ${target} (redis/${b})`;
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
  it('every file is in a part, and no import goes up or across the table', () => {
    const wrong = [...graph].flatMap(([file, targets]) =>
      targets.flatMap((t) => violation(file, t) ?? []),
    );
    expect(wrong).toEqual([]);
  });

  it('has no import circle', () => {
    expect(importCircles(graph)).toEqual([]);
  });

  it('the fair mode is reached through its one door (fair/index.ts)', () => {
    const side = [...graph]
      .filter(([file]) => partOf(file) !== 'fair')
      .flatMap(([file, targets]) =>
        targets
          .filter((t) => partOf(t) === 'fair' && t !== 'fair/index.ts')
          .map((t) => `${file} -> ${t}`),
      );
    expect(side).toEqual([]);
    expect(graph.get('redlock.ts')).toContain('fair/index.ts');
  });

  it('the check itself sees imports and refuses an import up', () => {
    expect(graph.get('redlock.ts')?.length).toBeGreaterThan(5);
    expect(violation('redlock.ts', 'policy/acquire.ts')).toBeUndefined();
    expect(violation('policy/acquire.ts', 'redis/store.ts')).toBeDefined();
    expect(violation('redis/scripts/lua.ts', 'redis/masters/node.ts')).toBeDefined();
  });
});
