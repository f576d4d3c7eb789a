/**
 * The documentation's relative links lead somewhere: every `[text](path#anchor)` of README.md,
 * CONTRIBUTING.md and docs/*.md names a file of the repository, and an anchor into a Markdown
 * file names one of its headings (GitHub's slugs) or `<a id>`s.
 */
import { expect, it } from '@jest/globals';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { REPO_ROOT, repoPath } from '../harness/paths';

const DOCS = [
  'README.md',
  'CONTRIBUTING.md',
  ...readdirSync(repoPath('docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** Files another change adds: links to them are checked once they exist. */
const PENDING = new Set(['docs/testing-locked-methods.md']);

/** GitHub's anchor of a heading. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a Markdown file: its headings' slugs and its `<a id="...">`s. */
function anchorsOf(text: string): Set<string> {
  const withoutCode = text.replace(/^```[\s\S]*?^```/gm, '');
  const anchors = new Set<string>();
  for (const m of withoutCode.matchAll(/^#{1,6} (.+)$/gm)) anchors.add(slug(m[1]));
  for (const m of withoutCode.matchAll(/<a id="([^"]+)"/g)) anchors.add(m[1]);
  return anchors;
}

it('every relative link names an existing file and heading', () => {
  const broken: string[] = [];
  for (const doc of DOCS) {
    const text = readFileSync(repoPath(doc), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1];
      if (/^[a-z]+:/i.test(target)) continue; // https:, mailto:
      const [path, anchor] = target.split('#');
      const file = path ? normalize(join(dirname(doc), path)) : doc;
      const rel = relative(REPO_ROOT, join(REPO_ROOT, file));
      if (PENDING.has(rel) && !existsSync(repoPath(rel))) continue;
      if (!existsSync(repoPath(rel))) {
        broken.push(`${doc}: ${target} (no ${rel})`);
      } else if (
        anchor &&
        rel.endsWith('.md') &&
        !anchorsOf(readFileSync(repoPath(rel), 'utf8')).has(anchor)
      ) {
        broken.push(`${doc}: ${target} (no heading #${anchor} in ${rel})`);
      }
    }
  }
  expect(broken).toEqual([]);
});

it('has no line that renders as a block quote by mistake (a `>` opening a wrapped line)', () => {
  const quoted: string[] = [];
  for (const doc of DOCS) {
    const lines = readFileSync(repoPath(doc), 'utf8').split('\n');
    let inCode = false;
    lines.forEach((line, i) => {
      if (/^\s*```/.test(line)) inCode = !inCode;
      // An indented `>` continues a list item as a quote: nothing in these documents means that.
      else if (!inCode && /^\s+>/.test(line)) quoted.push(`${doc}:${i + 1}: ${line.trim()}`);
    });
  }
  expect(quoted).toEqual([]);
});
