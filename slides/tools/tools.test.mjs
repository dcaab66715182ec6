// The slide builder's pieces against answers worked out by hand:
//   node --test slides/tools/tools.test.mjs
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { cut_excerpt } from './code_excerpt.mjs';
import { build_dir_from, out_dir_from, programs_of, repo_root, slides_dir, split_words } from './common.mjs';
import { parse_deck } from './deck.mjs';
import { page_query, PageQueryError } from './page_query.mjs';
import { plot_svg, rows_from_output } from './plot_svg.mjs';

const kSource = `#include <cstdio>

// Declared here, defined below: the declaration is not the excerpt.
int twice(int x);

// Doubles x.
// (Two comment lines belong to it.)
int twice(int x) {
  const char* brace = "}";  // a brace in a string does not close the body
  return 2 * x;
}

struct Point {
  int x = 0, y = 0;
};

template <typename T>
T add(T a, T b) {
  if (a) {
    return a + b;
  }
  return b;
}
`;

function with_source(body) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slides-test-'));
  fs.writeFileSync(path.join(dir, 'a.cpp'), kSource);
  try {
    return body(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('a function is cut from its comment to its closing brace, not at its declaration', () => with_source((dir) => {
  const e = cut_excerpt(dir, 'a.cpp', { symbol: 'twice' });
  assert.equal(e.first, 6);
  assert.equal(e.last, 11);
  assert.equal(e.text.split('\n')[0], '// Doubles x.');
  assert.equal(e.text.split('\n').at(-1), '}');
}));

test('a struct and a template keep their first and last lines', () => with_source((dir) => {
  const s = cut_excerpt(dir, 'a.cpp', { symbol: 'struct Point' });
  assert.deepEqual([s.first, s.last], [13, 15]);
  const t = cut_excerpt(dir, 'a.cpp', { symbol: 'add' });
  assert.deepEqual([t.first, t.last], [17, 23]);
  assert.ok(t.text.startsWith('template <typename T>'));
}));

test('from/to cuts and removes the common indentation', () => with_source((dir) => {
  const e = cut_excerpt(dir, 'a.cpp', { from: 'if (a)', to: 'return a + b' });
  assert.deepEqual([e.first, e.last], [19, 20]);
  assert.equal(e.text, 'if (a) {\n  return a + b;');
}));

test('what is not in the source is an error naming it', () => with_source((dir) => {
  assert.throws(() => cut_excerpt(dir, 'a.cpp', { symbol: 'thrice' }), /no definition of 'thrice' in a.cpp/);
  assert.throws(() => cut_excerpt(dir, 'a.cpp', { from: 'nope', to: 'x' }), /no line containing "nope"/);
  assert.throws(() => cut_excerpt(dir, 'b.cpp', { symbol: 'twice' }), /b.cpp does not exist/);
}));

test('command lines split like a shell for words and quotes; launchers name a second program', () => {
  assert.deepEqual(split_words(`a --x "b c" 'd e' f`), ['a', '--x', 'b c', 'd e', 'f']);
  assert.deepEqual(split_words(`x=1 xlabel="cap (MiB)" y='a b'c`), ['x=1', 'xlabel=cap (MiB)', 'y=a bc']);
  assert.throws(() => split_words('a "b'), /unclosed/);
  const words = split_words('build/launcher/distlab-run --nproc-per-node 2 -- build/lessons/lesson_05_all_reduce --backend gloo');
  assert.deepEqual(programs_of(words).map((p) => p.word), ['build/launcher/distlab-run', 'build/lessons/lesson_05_all_reduce']);
});

test('a plot takes the rows its regex matches, and refuses too few', () => {
  const output = 'cap 1 MiB: 10.5 ms\nnoise\ncap 4 MiB: 8.25 ms\ncap 16 MiB: 9 ms\n';
  const rows = rows_from_output(output, String.raw`cap (\d+) MiB: ([\d.]+) ms`, 1, [2]);
  assert.deepEqual(rows, [[1, 10.5], [4, 8.25], [16, 9]]);
  const svg = plot_svg(rows, { xlabel: 'cap', ylabel: 'ms', logx: true });
  assert.equal((svg.match(/<circle /g) || []).length, 3);
  assert.throws(() => plot_svg(rows.slice(0, 1), {}), /at least 2 rows/);
});

test('a deck without notes, with its own image or fenced block, is refused with its line', () => {
  const head = '---\ntitle: T\n---\n';
  assert.equal(parse_deck('d.md', `${head}# A\n<!-- say -->\n\n---\n\n## B\ntext\n<!--\nsay\n-->\n`).slides.length, 2);
  assert.throws(() => parse_deck('d.md', `${head}# A\ntext\n`), /d.md:4: slide "A" has no speaker notes/);
  assert.throws(() => parse_deck('d.md', `${head}# A\n![x](y.png)\n<!-- n -->\n`), /d.md:5: no images in a deck/);
  assert.throws(() => parse_deck('d.md', `${head}# A\n\`\`\`\ncode\n\`\`\`\n<!-- n -->\n`), /d.md:5: no fenced blocks/);
  // A plot's labels may hold spaces and slashes.
  const plot = parse_deck('d.md', `${head}<!-- artefacts\nrun r: build/x\nplot p: r /^(\\d+) (\\d+)$/ x=1 y=2 xlabel="bytes / rank" logx\n-->\n# A\n<!-- n -->\n`)
    .artefacts.get('p');
  assert.equal(plot.regex, String.raw`^(\d+) (\d+)$`);
  assert.equal(plot.options.xlabel, 'bytes / rank');
  assert.deepEqual(plot.flags, ['logx']);
  assert.throws(() => parse_deck('d.md', `${head}# A\n<!-- n -->\n## B\n`), /d.md:6: a second title "B" on slide "A": a --- missing\?/);
  // A Marp directive in a comment is not a note.
  assert.throws(() => parse_deck('d.md', `${head}<!-- _class: title -->\n# A\n`), /has no speaker notes/);
});

test('a run may declare the exit status it must end with; only a run', () => {
  const head = '---\ntitle: T\n---\n';
  const deck = parse_deck('d.md', `${head}<!-- artefacts\nrun ok: build/x --a\nrun hang exit=1: build/x --bug skip\n-->\n# A\n<!-- n -->\n`);
  assert.equal(deck.artefacts.get('ok').exit, 0);
  assert.equal(deck.artefacts.get('hang').exit, 1);
  assert.equal(deck.artefacts.get('hang').command, 'build/x --bug skip');
  assert.throws(() => parse_deck('d.md', `${head}<!-- artefacts\nviz v exit=1: build/y\n-->\n# A\n<!-- n -->\n`),
                /d.md:5: only a run declares its exit status, not a viz/);
});

test('an output folder the builder would empty is refused when it is or holds the sources', () => {
  // `--build-dir .` (the repository) puts the slides in slides/ itself: refused, as is the repository.
  assert.throws(() => out_dir_from(['--build-dir', '.'], build_dir_from(['--build-dir', '.'])), /the decks' own folder/);
  assert.throws(() => out_dir_from(['--out', repo_root], build_dir_from([])), /holds the sources/);
  assert.throws(() => out_dir_from(['--out', path.dirname(repo_root)], build_dir_from([])), /holds the sources/);
  assert.throws(() => out_dir_from(['--out', path.join(slides_dir, 'decks')], build_dir_from([])), /decks' own folder/);
  assert.equal(out_dir_from(['--build-dir', 'build'], build_dir_from(['--build-dir', 'build'])),
               path.join(repo_root, 'build', 'slides'));
  const elsewhere = path.join(os.tmpdir(), 'slides-out');
  assert.equal(out_dir_from(['--out', elsewhere], build_dir_from([])), elsewhere);
});

test("a live figure's address holds the view's options and leaves out the still's", () => {
  const words = (text) => split_words(text);
  // The still's size, file, instant and step go; the view stays, a flag as a bare key.
  assert.equal(page_query('05_all_reduce', words('--collective all_reduce --algorithms ring --ranks 4 --step 1 --width 1600 ' +
                                                   '--height 900 --scale 1.25 --time 10 --screenshot x.png')),
               '?collective=all_reduce&algorithms=ring&ranks=4');
  assert.equal(page_query('16', words('--panel collectives --collective all_to_all --ranks 4 --uneven')),
               '?panel=collectives&collective=all_to_all&ranks=4&uneven');
  // Lists keep their commas; a value with a space is escaped.
  assert.equal(page_query('10', words('--panel pipeline --schedule gpipe,1f1b --stages 4')),
               '?panel=pipeline&schedule=gpipe,1f1b&stages=4');
  assert.equal(page_query('16', words('--panel experts --experts-label "balancing 0.1"')),
               '?panel=experts&experts-label=balancing%200.1');
  // A trace is fetched from where scripts/web.sh copies the deck's runs' files.
  assert.equal(page_query('05_all_reduce', words('--panel trace --trace l5.json --width 1600')),
               '?panel=trace&trace=traces/05_all_reduce/l5.json');
  assert.equal(page_query('18_plan', words('--panel plan --plan plan18.json --width 1100')),
               '?panel=plan&plan=traces/18_plan/plan18.json');
  assert.equal(page_query('05', words('')), '');
  assert.throws(() => page_query('05', words('--trace')), PageQueryError);
  assert.throws(() => page_query('05', words('ring --ranks 4')), /not a long option/);
});
