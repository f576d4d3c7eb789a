/**
 * The TypeScript code blocks of the documentation (README.md and docs/*.md), as the doc-test
 * (test/docs/doc-snippets.spec.ts) compiles and runs them. Conventions, for whoever writes a
 * block (also in CONTRIBUTING.md):
 *
 * - Every ` ```ts ` block is a complete ES module of a user's Nest app (`"type": "module"`,
 *   `module: nodenext`, `strict`), compiled against this repository's `lib/` under the package's
 *   names (`nestjs-redlock`, `nestjs-redlock/testing`, `nestjs-redlock/health`).
 * - A block whose first line is a comment naming a file (`// src/app.module.ts`) is that file
 *   of the document's app: the blocks of one document import each other by those paths
 *   (`./orders/orders.controller.js`).
 * - `<!-- doc-test: prelude NAME -->` on the line before a block (blank lines between are fine): a fragment, compiled after
 *   test/docs/preludes/NAME.ts (declarations of what the fragment uses but does not define).
 * - `<!-- doc-test: skip -->` on the line before a block: not compiled (say why next to it).
 */
import { readFileSync } from 'node:fs';

/** One ` ```ts ` block of a Markdown file. */
export interface DocBlock {
  /** The Markdown file, relative to the repository's root. */
  doc: string;
  /** The line of the block's first code line in `doc` (1-based). */
  line: number;
  /** The code. */
  code: string;
  /** The file it is in the document's app (`src/app.module.ts`), when its first line names one. */
  file?: string;
  /** The prelude it is compiled after (test/docs/preludes/NAME.ts). */
  prelude?: string;
  /** Marked `<!-- doc-test: skip -->`. */
  skip: boolean;
}

const FENCE = /^(\s*)```(\S*)\s*$/;
const MARKER = /^<!--\s*doc-test:\s*(skip|prelude\s+([\w-]+))\s*-->\s*$/;
const FILE_COMMENT = /^\/\/ ((?:src|test)\/[\w./-]+\.ts)\b/;

/** The ` ```ts ` blocks of the Markdown text `text` of `doc` (nested fences included). */
export function parseBlocks(doc: string, text: string): DocBlock[] {
  const lines = text.split('\n');
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]);
    if (!open) continue;
    const indent = open[1];
    let end = i + 1;
    while (end < lines.length && lines[end].trim() !== '```') end++;
    if (open[2] === 'ts' || open[2] === 'typescript') {
      const code = lines
        .slice(i + 1, end)
        .map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l))
        .join('\n');
      let before = i - 1;
      while (before >= 0 && lines[before].trim() === '') before--;
      const marker = MARKER.exec(lines[before]?.trim() ?? '');
      blocks.push({
        doc,
        line: i + 2,
        code,
        file: FILE_COMMENT.exec(code)?.[1],
        prelude: marker?.[2],
        skip: marker?.[1] === 'skip',
      });
    }
    i = end;
  }
  return blocks;
}

/** The ` ```ts ` blocks of the Markdown file at `path` (`doc` names it in messages). */
export function readBlocks(path: string, doc: string): DocBlock[] {
  return parseBlocks(doc, readFileSync(path, 'utf8'));
}
