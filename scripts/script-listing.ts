/**
 * `npm run scripts:update` (or `npx ts-node --transpile-only scripts/script-listing.ts`; with
 * `--check`, writes nothing and exits 1 when the file is out of date)
 *
 * Writes docs/scripts.md: every Lua script the engine sends to the masters, exactly as they
 * receive it — the registry of lib/core/redis/scripts/lua.ts (`definedScripts()`: what the engine
 * loads on every master when it connects), each with where it is defined, its SHA1 (the one
 * EVALSHA calls), the KEYS/ARGV layout and reply shape it is defined with (`script(name, lua,
 * layout)`), and its text. test/unit/script-listing.spec.ts renders it again and fails while the
 * committed file differs, so that a change to a script shows in review as a change to that file.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { relative, sep } from 'node:path';
import '../lib/core';
import { definedScripts } from '../lib/core/redis/scripts/lua';
import type { LuaScript, ScriptLayout, ScriptSlot } from '../lib/core/redis/scripts/lua';
import { REPO_ROOT, repoPath } from '../test/harness/paths';

/** The listing's path, relative to the repository's root. */
export const LISTING = 'docs/scripts.md';

/** The command that writes it. */
export const UPDATE_COMMAND = 'npm run scripts:update';

/** Where a script is defined: the file and the constant `script()` is assigned to. */
export interface Definition {
  readonly file: string;
  readonly constant: string;
  /** Other exported names of the same script (`export const B = A;`). */
  readonly aliases: readonly { readonly constant: string; readonly file: string }[];
}

/** A script as listed. */
export interface ListedScript {
  readonly script: LuaScript;
  readonly layout: ScriptLayout;
  readonly definition: Definition;
  readonly fair: boolean;
}

/** The TypeScript files under lib/, relative to the root, `/`-separated, sorted. */
function libFiles(dir = 'lib'): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(repoPath(dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) files.push(...libFiles(path));
    else if (entry.name.endsWith('.ts')) files.push(path);
  }
  return files.sort();
}

/**
 * Every `script('name', …)` call of lib/ (name → where): read from the sources, since a script
 * does not know its file. Throws on a call that is not `export const X = script(` or on a name
 * defined twice.
 */
export function definitionSites(): Map<string, Definition> {
  const sites = new Map<string, { file: string; constant: string }>();
  const aliases = new Map<string, { constant: string; file: string }[]>();
  for (const file of libFiles()) {
    const text = readFileSync(repoPath(file), 'utf8');
    for (const m of text.matchAll(/(?<![.\w])script\(\s*'([^']+)'/g)) {
      const before = text.slice(0, m.index);
      const constant = /export const (\w+) = $/.exec(before)?.[1];
      if (!constant)
        throw new Error(`${file}: script('${m[1]}') is not \`export const X = script(\``);
      if (sites.has(m[1])) throw new Error(`script '${m[1]}' defined twice (${file})`);
      sites.set(m[1], { file, constant });
    }
    for (const m of text.matchAll(/^export const (\w+) = (\w+_SCRIPT);$/gm)) {
      aliases.set(m[2], [...(aliases.get(m[2]) ?? []), { constant: m[1], file }]);
    }
  }
  const out = new Map<string, Definition>();
  for (const [name, site] of sites) {
    out.set(name, { ...site, aliases: aliases.get(site.constant) ?? [] });
  }
  return out;
}

/** The scripts the engine sends, in the listing's order: the engine's, then the fair mode's; by name. */
export function listedScripts(): ListedScript[] {
  const sites = definitionSites();
  const listed = definedScripts().map((s): ListedScript => {
    const definition = sites.get(s.name);
    if (!definition) throw new Error(`script '${s.name}': no \`script('${s.name}'\` call in lib/`);
    if (!s.layout) throw new Error(`script '${s.name}' has no layout`);
    return { script: s, layout: s.layout, definition, fair: definition.file.includes('/fair/') };
  });
  const names = new Set(listed.map((l) => l.script.name));
  if (names.size !== listed.length) throw new Error('two scripts share a name');
  for (const name of sites.keys()) {
    if (!names.has(name))
      throw new Error(`script '${name}' is defined but the engine never loads it`);
  }
  return listed.sort(
    (a, b) => Number(a.fair) - Number(b.fair) || (a.script.name < b.script.name ? -1 : 1),
  );
}

/** SHA1 of a script's text, as Redis computes it (SCRIPT LOAD, EVALSHA). */
export function sha1(source: string): string {
  return createHash('sha1').update(source, 'utf8').digest('hex');
}

/** `a + b·n` as an index: `3`, `n`, `2n`, `n+1`. */
function index(a: number, b: number): string {
  const ns = b === 0 ? '' : b === 1 ? 'n' : `${b}n`;
  if (!ns) return String(a);
  return a === 0 ? ns : `${ns}+${a}`;
}

/**
 * Each slot's position: exact while every entry before it is always there, or comes only with
 * an entry whose position is exact (`withPrevious`), else `next` (KEYS; ARGV entries are left out
 * only at the end, so their positions are always exact).
 */
export function positions(array: 'KEYS' | 'ARGV', slots: readonly ScriptSlot[]): string[] {
  let a = 0;
  let b = 0;
  let exact = true;
  let chain = false;
  return slots.map((slot) => {
    const here = exact || (chain && slot.withPrevious === true);
    let at: string;
    if (slot.last) at = `${array}[#${array}]`;
    else if (!here)
      at = slot.count === 'n' ? 'next n' : slot.count === 'rest' ? 'the rest' : 'next';
    else if (slot.count === 'rest') {
      at = `${array}[${index(a + 1, b)}..#${array}]`;
      exact = false;
    } else if (slot.count === 'n') {
      at = `${array}[${index(a + 1, b)}..${index(a, b + 1)}]`;
      b++;
    } else {
      at = `${array}[${index(a + 1, b)}]`;
      a++;
    }
    if (slot.when && array === 'KEYS') {
      exact = false;
      chain = here;
    } else if (!here) chain = false;
    return at;
  });
}

/** `text` with its KEYS and ARGV references (and their comparisons) as code. */
function code(text: string): string {
  return text.replace(
    /(?:ARGV|KEYS)\[[^\]]+\](?: (?:==|~=|>) (?:'[^']*'|\d+))?/g,
    (m) => `\`${m}\``,
  );
}

/** When a slot is there. */
function present(slot: ScriptSlot): string {
  const when = code(slot.when ?? 'always');
  return slot.withPrevious ? `${when}, only with the entry before` : when;
}

/** A Markdown table, its columns padded to their widest cell. */
function table(head: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = head.map((h, c) => Math.max(3, h.length, ...rows.map((r) => r[c].length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((cell, c) => cell.padEnd(widths[c])).join(' | ')} |`;
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)];
}

/**
 * A paragraph, wrapped at 100 columns: never inside a code span, nor before a word that would
 * open a list, a quote or a heading at the start of a line.
 */
function paragraph(text: string): string[] {
  const words: string[] = [];
  for (const word of text.split(' ')) {
    const open = (words[words.length - 1]?.split('`').length ?? 1) % 2 === 0;
    if (open) words[words.length - 1] += ` ${word}`;
    else words.push(word);
  }
  const lines: string[] = [];
  let line = '';
  for (const word of words) {
    const opens = /^([-+*>#|]|\d+[.)])$/.test(word) || word.startsWith('>');
    if (line && line.length + 1 + word.length > 100 && !opens) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  return [...lines, line, ''];
}

function slots(array: 'KEYS' | 'ARGV', list: readonly ScriptSlot[]): string[] {
  if (list.length === 0) return [`**${array}**: none.`, ''];
  const at = positions(array, list);
  const rows = list.map((s, i) => [`\`${at[i]}\``, code(s.name), present(s)]);
  return [`**${array}**`, '', ...table(['Position', 'Holds', 'Present'], rows), ''];
}

function section(l: ListedScript): string[] {
  const { script: s, layout, definition: d } = l;
  if (!s.source.startsWith('\n') || !s.source.endsWith('\n')) {
    throw new Error(
      `script '${s.name}': the listing needs its text to begin and end with a newline`,
    );
  }
  if (sha1(s.source) !== s.sha) throw new Error(`script '${s.name}': sha is not the text's SHA1`);
  const also = d.aliases.map((a) => `. Also exported as \`${a.constant}\` by ${a.file}`).join('');
  return [
    `### \`${s.name}\``,
    '',
    ...paragraph(
      `\`${d.constant}\` in [${d.file}](../${d.file}) · SHA1 \`${s.sha}\` · ` +
        `${Buffer.byteLength(s.source, 'utf8')} bytes${also && `${also}.`}`,
    ),
    ...slots('KEYS', layout.keys),
    ...slots('ARGV', layout.argv),
    ...paragraph(`**Reply**: ${layout.reply}`),
    // The text: the block's lines, with the newline before the first and after the last.
    '```lua' + s.source + '```',
    '',
  ];
}

/**
 * docs/scripts.md as it should be. (Not formatted by prettier, which would take the spaces off
 * the scripts' blank lines: .prettierignore lists it.)
 */
export function renderListing(): string {
  const listed = listedScripts();
  const lines = [
    '# The scripts as sent',
    '',
    `<!-- Generated by scripts/script-listing.ts (\`${UPDATE_COMMAND}\`) from the scripts' ` +
      'definitions: do not edit. -->',
    '',
    ...paragraph(
      `Every Lua script the engine sends to the masters (${listed.length}), exactly as they ` +
        'receive it. Each is one fixed text, defined once with `script()` ' +
        '(lib/core/redis/scripts/lua.ts) and loaded on every master when the engine connects: ' +
        'the settings (fencing, the restart quarantine, `fairness`, the lock kinds, ' +
        '`repairOnExtend`, …) change only what a call puts in KEYS and ARGV, never the text, so ' +
        'no script has variants. The SHA1 is the one EVALSHA calls (Redis computes it over the ' +
        'text); the text is the `lua` block, byte for byte, with a newline before its first ' +
        'line and after its last.',
    ),
    ...paragraph(
      'In the layouts, `n` is the number of lock keys (one per resource). A KEYS entry that is ' +
        'present only under a condition moves the later ones when it is absent (their position ' +
        'is then `next`); an ARGV entry with a condition is left out only at the end, after ' +
        'every entry before it. A reply `{a, b}` is a Lua table (an array reply).',
    ),
    ...paragraph(
      'A change to a script shows in review as a change to this file: after one, run ' +
        `\`${UPDATE_COMMAND}\` and commit it (test/unit/script-listing.spec.ts fails while it ` +
        "is out of date, and holds each layout to its script's KEYS and ARGV indices).",
    ),
    ...table(
      ['Script', 'Defined as', 'SHA1'],
      listed.map((l) => [
        `[\`${l.script.name}\`](#${l.script.name})`,
        `\`${l.definition.constant}\` (${l.definition.file})`,
        `\`${l.script.sha.slice(0, 12)}\``,
      ]),
    ),
    '',
    "## The engine's scripts",
    '',
    ...listed.filter((l) => !l.fair).flatMap(section),
    "## The fair mode's scripts",
    '',
    ...paragraph(
      "Sent with `fairness: 'across-processes'` (lib/core/fair/README.md); loaded by every " +
        'engine.',
    ),
    ...listed.filter((l) => l.fair).flatMap(section),
  ];
  return lines.join('\n').replace(/\n+$/, '\n');
}

function main(): void {
  const rendered = renderListing();
  const path = repoPath(LISTING);
  let committed = '';
  try {
    committed = readFileSync(path, 'utf8');
  } catch {
    // not written yet
  }
  if (process.argv.includes('--check')) {
    if (committed !== rendered) {
      console.error(`${LISTING} is out of date: run \`${UPDATE_COMMAND}\` and commit it.`);
      process.exit(1);
    }
    return;
  }
  if (committed !== rendered) writeFileSync(path, rendered);
  console.log(
    `${relative(REPO_ROOT, path).split(sep).join('/')}: ${listedScripts().length} scripts` +
      (committed === rendered ? ' (unchanged)' : ''),
  );
}

if (/script-listing\.ts$/.test(process.argv[1] ?? '')) {
  main();
}
