// A deck's source (slides/decks/NN_name.md), read into plain data:
//
//   ---                                   the deck's own front matter
//   title: Broadcast
//   lesson: 03_broadcast                  (absent for the course's opening deck)
//   ---
//   <!-- artefacts                        what the build makes for this deck
//   run main: build/lessons/lesson_03_broadcast --backend threads --ranks 8
//   run hang exit=1: build/lessons/...        (a run that must end with that status)
//   viz friends: build/viz/distlab-viz --preset friends --time 12.5
//   plot sweep: main /^ +(\d+) MiB +([\d.]+) ms/ x=1 y=2 xlabel="cap (MiB)" ylabel="ms"
//   -->
//   # Broadcast                            slides, separated by lines of ---
//   @figure friends                       directives, each alone on a line
//   <!-- speaker notes ... @live main --> every slide has notes
//
// Directives: @output RUN [from "a"] [to "b"] [grep "c|d"] [lines A-B] [cut N]
// (cut: lines longer than N characters end in '…'),
// @command RUN, @figure VIZ [size] [live] (live: the visualizer itself in
// the slide when the deck is served beside the site), @plot PLOT [size],
// @code PATH SYMBOL | @code PATH from "a" to "b". In notes, `@live RUN`
// becomes "$ " and the run's command: the exact line to type in class.
// A deck may not carry images or fenced blocks of its own: everything shown
// that a program printed, drew or contains is made by the build.
import fs from 'node:fs';
import { split_words } from './common.mjs';

export class DeckError extends Error {}

function fail(file, line, message) {
  throw new DeckError(`${file}:${line}: ${message}`);
}

// key=value and key="value with spaces" pairs, and bare flags, after the
// positional words.
export function parse_options(words) {
  const options = {}, positional = [];
  for (const w of words) {
    const m = w.match(/^([a-z_]+)=(.*)$/);
    if (m) options[m[1]] = m[2];
    else positional.push(w);
  }
  return { options, positional };
}

function parse_artefact(file, line_no, text) {
  const m = text.match(/^(run|viz|plot)\s+([a-z0-9_]+)(?:\s+exit=(\d+))?\s*:\s*(.+)$/);
  if (!m) fail(file, line_no, `an artefact is "run|viz|plot NAME: ...", not "${text}"`);
  const [, kind, name, exit, rest] = m;
  // `run NAME exit=N:` a run that must end with status N (a lesson that shows a failure).
  if (exit !== undefined && kind !== 'run') fail(file, line_no, `only a run declares its exit status, not a ${kind}`);
  if (kind === 'run') return { kind, name, command: rest.trim(), exit: Number(exit ?? 0), line: line_no };
  if (kind !== 'plot') return { kind, name, command: rest.trim(), line: line_no };
  // plot NAME: RUN /regex/ x=1 y=2,3 xlabel=".." ylabel=".." legend="a,b" logx
  // The regex ends at the last '/' before the options (a label may hold a '/').
  const pm = rest.match(/^([a-z0-9_]+)\s+\/(.+?)\/((?:\s+(?:[a-z_]+=|logx|ymin0)\S*.*)?)$/);
  if (!pm) fail(file, line_no, `a plot is "plot NAME: RUN /regex/ x=N y=N,..", not "${rest}"`);
  const { options, positional } = parse_options(split_words(pm[3]));
  return { kind, name, run: pm[1], regex: pm[2], options, flags: positional, line: line_no };
}

export function parse_deck(file, source) {
  const lines = source.split('\n');
  if (lines[0] !== '---') fail(file, 1, 'a deck starts with its front matter (---, title:, lesson:, ---)');
  const meta = {};
  let i = 1;
  for (; i < lines.length && lines[i] !== '---'; ++i) {
    const m = lines[i].match(/^([a-z_]+):\s*(.*)$/);
    if (!m) fail(file, i + 1, `front matter lines are "key: value", not "${lines[i]}"`);
    meta[m[1]] = m[2].trim();
  }
  if (!meta.title) fail(file, 1, 'the front matter needs a title');
  ++i;

  const artefacts = new Map();
  const slides = [];
  let current = null, in_notes = false, in_artefacts = false;
  const start_slide = (line_no) => {
    current = { line: line_no, body: [], notes: 0, title: null };
    slides.push(current);
  };
  for (; i < lines.length; ++i) {
    const line = lines[i], no = i + 1;
    if (in_artefacts) {
      if (line.trim() === '-->') in_artefacts = false;
      else if (line.trim()) {
        const a = parse_artefact(file, no, line.trim());
        if (artefacts.has(a.name)) fail(file, no, `artefact '${a.name}' is defined twice`);
        artefacts.set(a.name, a);
      }
      continue;
    }
    if (line.trim() === '<!-- artefacts') { in_artefacts = true; continue; }
    if (!current) {
      if (!line.trim()) continue;
      start_slide(no);
    }
    if (!in_notes && line === '---') { start_slide(no + 1); continue; }
    if (!in_notes && /^\s*<!--\s*_?(class|paginate|header|footer|backgroundColor|color)\s*:.*-->\s*$/.test(line)) {
      current.body.push(line);  // a Marp directive for this slide, not a note
      continue;
    }
    if (!in_notes && /^\s*<!--/.test(line)) {
      ++current.notes;
      in_notes = !line.includes('-->');
      current.body.push(line);
      continue;
    }
    if (in_notes) {
      if (line.includes('-->')) in_notes = false;
      current.body.push(line);
      continue;
    }
    if (/^\s*(```|~~~)/.test(line)) fail(file, no, 'no fenced blocks in a deck: use @output, @command or @code');
    if (/!\[[^\]]*\]\(/.test(line) || /<img\b/i.test(line))
      fail(file, no, 'no images in a deck: use @figure or @plot, made by the build');
    const h = line.match(/^#{1,2}\s+(.+)$/);
    if (h && current.title) fail(file, no, `a second title "${h[1].trim()}" on slide "${current.title}": a --- missing?`);
    if (h) current.title = h[1].trim();
    current.body.push(line);
  }
  if (in_notes) fail(file, lines.length, 'speaker notes left open (<!-- without -->)');
  if (in_artefacts) fail(file, lines.length, 'the artefacts block is left open');
  for (const s of slides) {
    if (!s.title) fail(file, s.line, 'every slide has a title (a # or ## heading)');
    if (!s.notes) fail(file, s.line, `slide "${s.title}" has no speaker notes (<!-- ... -->)`);
  }
  return { file, meta, artefacts, slides };
}

export function read_deck(path_to_file, name) {
  return parse_deck(name, fs.readFileSync(path_to_file, 'utf8'));
}
