/**
 * `withFields` (lib/core/base/fields.ts), the library's stand-in for `{ ...base, ...fields }` on the
 * per-lock path, and the lint rule (eslint.config.mjs) that keeps the slow literal — a spread
 * first and more after it — out of that code.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { withFields } from '../../../lib/core/base/fields';
import { REPO_ROOT } from '../../harness/paths';

describe('withFields', () => {
  it('is { ...base, ...fields }: a new object, the fields win, the base is untouched', () => {
    const base = Object.freeze({ a: 1, b: 'two', c: undefined as number | undefined });
    const out = withFields(base, { b: 2, d: true });
    expect(out).toStrictEqual({ a: 1, b: 2, c: undefined, d: true });
    expect(out).not.toBe(base);
    expect(base).toStrictEqual({ a: 1, b: 'two', c: undefined });
    expect(Object.keys(out)).toEqual(['a', 'b', 'c', 'd']);
    // A field set to undefined is set (as with a spread), not skipped.
    expect(withFields({ a: 1 }, { a: undefined })).toStrictEqual({ a: undefined });
    expect(Object.isFrozen(out)).toBe(false);
  });
});

describe('the hot-path lint rule (eslint.config.mjs)', () => {
  const root = REPO_ROOT;
  const lint = (code: string, file: string): { status: number | null; out: string } => {
    const r = spawnSync(
      process.execPath,
      [
        join(root, 'node_modules/eslint/bin/eslint.js'),
        '--stdin',
        '--stdin-filename',
        file,
        '--rule',
        '@typescript-eslint/no-unused-vars: off',
      ],
      { cwd: root, input: code, encoding: 'utf8' },
    );
    return { status: r.status, out: r.stdout + r.stderr };
  };

  it('refuses a literal that starts with a spread and goes on, in the per-lock code', () => {
    for (const code of [
      'export const f = (a: object) => ({ ...a, b: 1 });',
      'export const f = (a: object, b: object) => ({ ...a, ...b });',
    ]) {
      const r = lint(code, 'lib/core/policy/example.ts');
      expect(r.out).toContain('no-restricted-syntax');
      expect(r.status).toBe(1);
    }
  }, 60_000);

  it('lets the fast forms through: a lone spread, a spread after the fields, withFields', () => {
    for (const code of [
      'export const f = (a: object) => ({ ...a });',
      'export const f = (a: object) => ({ b: 1, ...a });',
      "import { withFields } from '../fields';\nexport const f = (a: object) => withFields(a, { b: 1 });",
    ]) {
      const r = lint(code, 'lib/core/policy/example.ts');
      expect(r.out).not.toContain('no-restricted-syntax');
      expect(r.status).toBe(0);
    }
  }, 60_000);
});
