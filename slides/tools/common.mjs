// What the slide builder and the slide checks share: where things are, how a
// command line is split and mapped onto the build, and hashing.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const slides_dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const repo_root = path.resolve(slides_dir, '..');
export const decks_dir = path.join(slides_dir, 'decks');
export const lessons_dir = path.join(repo_root, 'lessons');

// The build folder: --build-dir, else $BUILD_DIR, else build/ in the repo.
export function build_dir_from(args) {
  const i = args.indexOf('--build-dir');
  const dir = i >= 0 ? args[i + 1] : process.env.BUILD_DIR || 'build';
  return path.resolve(repo_root, dir);
}

// Where the slides go: --out, else BUILD/slides. The builder empties it
// first, so a folder that is, holds or lies in the sources (the repository,
// slides/: `--build-dir .` makes BUILD/slides the decks' own folder) is
// refused with the reason.
export class OutDirError extends Error {}

export function out_dir_from(args, build_dir) {
  const i = args.indexOf('--out');
  const out = i >= 0 ? path.resolve(args[i + 1]) : path.join(build_dir, 'slides');
  check_out_dir(out);
  return out;
}

// out_dir_from for a program: one line and exit status 2 instead of a throw.
export function out_dir_or_exit(args, build_dir) {
  try {
    return out_dir_from(args, build_dir);
  } catch (e) {
    if (!(e instanceof OutDirError)) throw e;
    process.stderr.write(`slides: ${e.message}\n`);
    process.exit(2);
  }
}

function check_out_dir(out) {
  const inside = (dir, parent) => dir === parent || !path.relative(parent, dir).startsWith('..') && !path.isAbsolute(path.relative(parent, dir));
  if (inside(repo_root, out) || inside(out, slides_dir))
    throw new OutDirError(`the slides would go to ${out}, which the builder empties first and which ` +
                    `${inside(out, slides_dir) ? 'is the decks\' own folder' : 'holds the sources'}: ` +
                    `give --build-dir the build folder (relative paths are the repository's: build, not .)`);
}

export function sha256(data) {
  return crypto.createHash('sha256').update(data).digest('hex');
}

// Splits a command line as a shell would for plain words and "double" or
// 'single' quoted parts, also inside a word (xlabel="bucket cap"); no
// variables, no globs, no pipes: a slide's command is one program and its
// flags.
export function split_words(line) {
  const words = [];
  let word = null, quote = null;
  for (let i = 0; i < line.length; ++i) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && i + 1 < line.length) word += line[++i];
      else word += c;
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else {
      word ??= '';
      if (c === '"' || c === "'") quote = c;
      else if (c === '\\' && i + 1 < line.length) word += line[++i];
      else word += c;
    }
  }
  if (quote) throw new Error(`unclosed ${quote} in: ${line}`);
  if (word !== null) words.push(word);
  return words;
}

// A command as written on a slide names programs as a user types them from
// the repository's root (`build/lessons/lesson_03_broadcast`); run by the
// builder, `build/` is the build folder in use.
export function map_to_build(word, build_dir) {
  return word.startsWith('build/') ? path.join(build_dir, word.slice('build/'.length)) : word;
}

// The programs a command line starts: the first word, and the program after
// a launcher's `--` (distlab-run ... -- build/lessons/...).
export function programs_of(words) {
  const programs = [{ index: 0, word: words[0] }];
  const dashdash = words.indexOf('--');
  if (dashdash >= 0 && dashdash + 1 < words.length) programs.push({ index: dashdash + 1, word: words[dashdash + 1] });
  return programs;
}

export function deck_files() {
  return fs.readdirSync(decks_dir).filter((f) => /^\d\d_[a-z0-9_]+\.md$/.test(f)).sort();
}

export function lesson_folders() {
  return fs.readdirSync(lessons_dir).filter((d) => /^\d\d_/.test(d) && fs.existsSync(path.join(lessons_dir, d, 'main.cpp')))
    .sort();
}

export function read_json(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

// Debian's chromium (or $CHROME_PATH): Marp prints the PDFs with it and the
// checks open the decks in it. Nothing here downloads a browser.
export function chrome_path() {
  if (process.env.CHROME_PATH) return process.env.CHROME_PATH;
  for (const p of ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'])
    if (fs.existsSync(p)) return p;
  throw new Error("no chromium: install Debian's chromium (scripts/setup.sh does) or set CHROME_PATH");
}
