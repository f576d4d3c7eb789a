/**
 * The API reference docs/api.md is what scripts/api-docs.mjs renders from the committed API
 * reports (api/*.api.md): after `npm run api:update` (which also runs `npm run docs:api`), commit
 * both.
 */
import { expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { repoPath } from '../harness/paths';

it('docs/api.md is up to date with api/*.api.md', () => {
  const check = spawnSync(process.execPath, [repoPath('scripts', 'api-docs.mjs'), '--check'], {
    encoding: 'utf8',
  });
  expect(check.stderr).toBe('');
  expect(check.status).toBe(0);
});

it('lists every export of every entry point', () => {
  const reference = readFileSync(repoPath('docs', 'api.md'), 'utf8');
  for (const report of ['nestjs-redlock', 'nestjs-redlock-testing', 'nestjs-redlock-health']) {
    const text = readFileSync(repoPath('api', `${report}.api.md`), 'utf8');
    const names = [...text.matchAll(/^export (?:declare )?(?:abstract )?\w+ ([\w$]+)/gm)].map(
      (m) => m[1],
    );
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) expect(reference).toContain(`### \`${name}\``);
  }
});
