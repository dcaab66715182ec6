// Code excerpts cut from DistLab's sources at build time, so that a slide
// can only show code that exists. Two ways to name an excerpt:
//   by symbol:  a function, class or struct definition, with the comment
//               lines right above it (`tree_broadcast_by_hand`,
//               `Reducer::launch`, `class PipelineExecutor`);
//   by text:    from the first line containing FROM through the first line
//               after it containing TO (both included).
// Anything not found is an error naming the file and what was looked for.
import fs from 'node:fs';

// The line index where `symbol`'s definition starts, or -1. A definition is
// a line naming the symbol (as `symbol(`, `class symbol`, `struct symbol`)
// whose statement reaches `{` before `;`.
function find_definition(lines, symbol) {
  const bare = symbol.replace(/^(class|struct)\s+/, '');
  const escaped = bare.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const patterns = symbol.startsWith('class ') || symbol.startsWith('struct ')
    ? [new RegExp(`^\\s*(template\\s*<.*>\\s*)?(class|struct)\\s+${escaped}\\b`)]
    : [new RegExp(`(^|[\\s*&:~])${escaped}\\s*\\(`), new RegExp(`^\\s*(class|struct)\\s+${escaped}\\b`)];
  for (let i = 0; i < lines.length; ++i) {
    const line = lines[i];
    if (/^\s*(\/\/|\*|#)/.test(line)) continue;  // comments and preprocessor lines
    if (!patterns.some((p) => p.test(line))) continue;
    // Walk the statement: a declaration ends in ';' before any '{'.
    for (let j = i; j < Math.min(lines.length, i + 12); ++j) {
      const code = strip_strings_and_comments(lines[j]);
      const brace = code.indexOf('{'), semi = code.indexOf(';');
      if (brace >= 0 && (semi < 0 || brace < semi)) return i;
      if (semi >= 0) break;
    }
  }
  return -1;
}

// A line without its string/char literals and // comment: braces in them
// must not count.
function strip_strings_and_comments(line) {
  return line.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/'(?:[^'\\]|\\.)*'/g, "''").replace(/\/\/.*$/, '');
}

// From the definition's first line through the line that closes its first
// brace (and a `;` after a class body).
function definition_end(lines, start) {
  let depth = 0, opened = false;
  for (let i = start; i < lines.length; ++i) {
    for (const ch of strip_strings_and_comments(lines[i])) {
      if (ch === '{') { ++depth; opened = true; }
      else if (ch === '}') --depth;
    }
    if (opened && depth === 0) return i;
  }
  return -1;
}

// The comment block (and a template<> line) right above `start`.
function leading_lines(lines, start) {
  let i = start;
  if (i > 0 && /^\s*template\s*</.test(lines[i - 1])) --i;
  while (i > 0 && /^\s*\/\//.test(lines[i - 1])) --i;
  return i;
}

// Returns {path, first, last (1-based, inclusive), text}.
export function cut_excerpt(repo_root, rel_path, spec) {
  const file = `${repo_root}/${rel_path}`;
  if (!fs.existsSync(file)) throw new Error(`code excerpt: ${rel_path} does not exist`);
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  let first, last;
  if (spec.symbol) {
    // `Outer::name`: the definition of name inside Outer's file, written
    // either as Outer::name( ... ) or inside the class.
    const candidates = [spec.symbol];
    if (spec.symbol.includes('::')) candidates.push(spec.symbol.split('::').pop());
    let start = -1;
    for (const c of candidates) if ((start = find_definition(lines, c)) >= 0) break;
    if (start < 0) throw new Error(`code excerpt: no definition of '${spec.symbol}' in ${rel_path}`);
    const end = definition_end(lines, start);
    if (end < 0) throw new Error(`code excerpt: '${spec.symbol}' in ${rel_path} has no closing brace`);
    first = leading_lines(lines, start);
    last = end;
    if (/^\s*(class|struct)\b/.test(lines[start]) && !lines[end].includes(';') && lines[end + 1]?.trim() === ';')
      ++last;
  } else {
    first = lines.findIndex((l) => l.includes(spec.from));
    if (first < 0) throw new Error(`code excerpt: no line containing "${spec.from}" in ${rel_path}`);
    const after = lines.slice(first).findIndex((l) => l.includes(spec.to));
    if (after < 0) throw new Error(`code excerpt: no line containing "${spec.to}" after "${spec.from}" in ${rel_path}`);
    last = first + after;
  }
  const body = lines.slice(first, last + 1);
  // Drop the common indentation: an excerpt of a nested block starts at column 0.
  const indent = Math.min(...body.filter((l) => l.trim()).map((l) => l.match(/^ */)[0].length));
  const text = body.map((l) => l.slice(indent)).join('\n');
  return { path: rel_path, first: first + 1, last: last + 1, text };
}

// The language of a fenced block for this file.
export function language_of(rel_path) {
  if (/\.(cpp|hpp|h|cc)$/.test(rel_path)) return 'cpp';
  if (/\.py$/.test(rel_path)) return 'python';
  if (/\.sh$/.test(rel_path) || /(^|\/)\.ci\/run$/.test(rel_path)) return 'bash';
  if (/CMakeLists\.txt$|\.cmake$/.test(rel_path)) return 'cmake';
  return 'text';
}
