// The slide checks, run by ctest after the slide build (each can fail):
//
//   node slides/tools/check.mjs decks     every lesson has a deck; its part titles are slide titles
//   node slides/tools/check.mjs manifest  every figure, output and code excerpt was made by this build
//   node slides/tools/check.mjs pdf       each PDF has one page per slide, none blank
//   node slides/tools/check.mjs html      each deck in headless chromium, network off: no failed
//                                         request or console error, every slide there, nothing
//                                         overflowing, a figure on screen, the presenter view
//   node slides/tools/check.mjs notes     every command in the notes names a built program and its flags
//
// [--build-dir build] [--out DIR] as for the builder. Exit status 1 with one line per
// problem.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cut_excerpt } from './code_excerpt.mjs';
import { build_dir_from, chrome_path, deck_files, decks_dir, lesson_folders, map_to_build, out_dir_or_exit, programs_of, read_json,
         repo_root, sha256, slides_dir, split_words } from './common.mjs';
import { read_deck } from './deck.mjs';

const args = process.argv.slice(2);
const what = args[0];
const build_dir = build_dir_from(args);
const out = out_dir_or_exit(args, build_dir);
const problems = [];
const problem = (text) => problems.push(text);

function manifest() {
  const file = path.join(out, 'manifest.json');
  if (!fs.existsSync(file)) {
    console.error(`check: ${file} is missing: build the slides first (scripts/slides.sh)`);
    process.exit(1);
  }
  return read_json(file);
}

function run(program, argv, options = {}) {
  return spawnSync(program, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000, ...options });
}

// ---- decks -------------------------------------------------------------------

function check_decks() {
  const decks = deck_files().map((f) => f.replace(/\.md$/, ''));
  if (!decks.includes('00_course')) problem('slides/decks/00_course.md (the course\'s opening deck) is missing');
  for (const lesson of lesson_folders()) {
    if (!decks.includes(lesson)) {
      problem(`lessons/${lesson} has no deck: write slides/decks/${lesson}.md`);
      continue;
    }
    const deck = read_deck(path.join(decks_dir, `${lesson}.md`), `slides/decks/${lesson}.md`);
    if (deck.meta.lesson !== lesson) problem(`slides/decks/${lesson}.md: front matter says lesson "${deck.meta.lesson}", not "${lesson}"`);
    // Each part a lesson steps through (--step) has a slide of the same title.
    const program = path.join(build_dir, 'lessons', `lesson_${lesson}`);
    if (!fs.existsSync(program)) {
      problem(`${program} is not built`);
      continue;
    }
    const listed = run(program, ['--list-parts']);
    if (listed.status !== 0) {
      problem(`lesson_${lesson} --list-parts failed: ${listed.stderr.trim()}`);
      continue;
    }
    const titles = new Set(deck.slides.map((s) => s.title));
    const parts = listed.stdout.split('\n').map((l) => l.match(/^\d+\.\s+(.+)$/)).filter(Boolean).map((m) => m[1].trim());
    if (!parts.length) problem(`lesson_${lesson} --list-parts printed no "N. Title" line`);
    for (const part of parts)
      if (![...titles].some((t) => t === part || t.startsWith(`${part}:`) || t.endsWith(`: ${part}`)))
        problem(`slides/decks/${lesson}.md has no slide titled "${part}" (part of lesson_${lesson} --step)`);
  }
  for (const deck of decks)
    if (deck !== '00_course' && !lesson_folders().includes(deck)) problem(`slides/decks/${deck}.md names no lesson folder`);
}

// ---- manifest ----------------------------------------------------------------

function check_manifest() {
  const m = manifest();
  const names = deck_files().map((f) => f.replace(/\.md$/, ''));
  for (const name of names) if (!m.decks[name]) problem(`deck ${name} was not built (not in manifest.json)`);
  const started = Date.parse(m.started);
  const files = new Map();
  for (const a of m.artefacts) {
    if (a.reused) problem(`${a.deck}: run '${a.name}' was reused from an earlier build (--reuse): build again without it`);
    if (a.file && a.sha256) {
      const file = path.join(out, a.file);
      if (!fs.existsSync(file)) { problem(`${a.deck}: ${a.file} is in the manifest but missing`); continue; }
      if (sha256(fs.readFileSync(file)) !== a.sha256) problem(`${a.deck}: ${a.file} differs from what the build made`);
      if (fs.statSync(file).mtimeMs < started - 1000) problem(`${a.deck}: ${a.file} is older than this build`);
      files.set(a.file, a);
    }
    // A code excerpt still is what the source holds.
    if (a.kind === 'code') {
      try {
        const again = cut_excerpt(repo_root, a.file, a.spec);
        if (sha256(again.text) !== a.text_sha256) problem(`${a.deck}: the excerpt of ${a.file} (${JSON.stringify(a.spec)}) changed in the source since the build`);
      } catch (e) {
        problem(`${a.deck}: ${e.message}`);
      }
    }
  }
  // Every figure the HTML shows is an artefact of its deck; no stray figure.
  for (const [name, d] of Object.entries(m.decks)) {
    const html = fs.readFileSync(path.join(out, d.html), 'utf8');
    if (sha256(html) !== d.html_sha256) problem(`${name}: ${d.html} is not the HTML this build wrote`);
    for (const [, src] of html.matchAll(/<img[^>]*\ssrc="([^"]+)"/g)) {
      if (/^(https?:|\/\/)/.test(src)) { problem(`${name}: an image from the network: ${src}`); continue; }
      const a = files.get(decodeURI(src));
      if (!a || a.deck !== name) problem(`${name}: shows ${src}, which this build did not make for it`);
    }
  }
  const figures = path.join(out, 'figures');
  for (const deck of fs.existsSync(figures) ? fs.readdirSync(figures) : [])
    for (const f of fs.readdirSync(path.join(figures, deck)))
      if (!files.has(`figures/${deck}/${f}`)) problem(`figures/${deck}/${f} is in the output but not in the manifest`);
}

// ---- pdf -----------------------------------------------------------------------

// A page is blank when (almost) every pixel has the page's background colour.
function ink_fraction(pgm) {
  // Binary PGM: "P5\n<w> <h>\n<max>\n" then w*h bytes.
  const header = pgm.subarray(0, 64).toString('latin1').match(/^P5\s+(\d+)\s+(\d+)\s+(\d+)\s/);
  const [w, h] = [Number(header[1]), Number(header[2])];
  const pixels = pgm.subarray(header[0].length, header[0].length + w * h);
  const counts = new Map();
  for (const p of pixels) counts.set(p, (counts.get(p) ?? 0) + 1);
  const background = Math.max(...counts.values());
  return 1 - background / pixels.length;
}

function check_pdf() {
  const m = manifest();
  const tmp = fs.mkdtempSync(path.join(out, '.pdfcheck-'));
  try {
    for (const [name, d] of Object.entries(m.decks)) {
      if (!d.pdf) { problem(`${name}: built without a PDF (--no-pdf)`); continue; }
      const pdf = path.join(out, d.pdf);
      const info = run('pdfinfo', [pdf]);
      const pages = Number(info.stdout.match(/^Pages:\s+(\d+)/m)?.[1]);
      if (pages !== d.slides) problem(`${name}.pdf has ${pages} pages for ${d.slides} slides`);
      const r = run('pdftoppm', ['-r', '20', '-gray', pdf, path.join(tmp, name)]);
      if (r.status !== 0) { problem(`pdftoppm ${name}.pdf failed: ${r.stderr}`); continue; }
      const images = fs.readdirSync(tmp).filter((f) => f.startsWith(`${name}-`) && f.endsWith('.pgm')).sort();
      if (images.length !== pages) problem(`${name}.pdf: pdftoppm made ${images.length} pages of ${pages}`);
      for (const img of images) {
        const ink = ink_fraction(fs.readFileSync(path.join(tmp, img)));
        // A slide with a title and one line of text inks about 1 % of a 20 dpi page.
        if (ink < 0.005) problem(`${name}.pdf page ${Number(img.match(/-(\d+)\.pgm$/)[1])} is blank (${(ink * 100).toFixed(2)} % ink)`);
      }
      console.log(`check: ${name}.pdf: ${pages} pages, none blank`);
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

// ---- html ----------------------------------------------------------------------

// How far a screenshot's crop is from the figure file, 0 (same) to 1.
function image_distance(shot, figure, w, h) {
  const resized = `${shot}.figure.png`;
  let r = run('convert', [figure, '-resize', `${w}x${h}!`, resized]);
  if (r.status !== 0) throw new Error(`convert: ${r.stderr}`);
  r = run('compare', ['-metric', 'RMSE', shot, resized, 'null:']);
  const m = r.stderr.match(/\(([\d.e-]+)\)/);
  if (!m) throw new Error(`compare: ${r.stderr}`);
  return Number(m[1]);
}

// Waits until bespoke shows slide n (1-based): the hash is #n, its slide is
// the active one (and so are its notes, in the presenter view), its images
// are decoded and the fonts loaded. The event itself, never a fixed delay:
// returns '' once it is there, else what the page showed after `ms`.
async function until_slide(page, n, ms = 10000) {
  try {
    await page.waitForFunction(async (n) => {
      if (location.hash !== `#${n}`) return false;
      const slide = document.querySelectorAll('svg[data-marpit-svg]')[n - 1];
      if (!slide?.classList.contains('bespoke-marp-active')) return false;
      const notes = [...document.querySelectorAll('.bespoke-marp-note')].filter((e) => Number(e.dataset.index) === n - 1);
      if (document.body.dataset.bespokeView === 'presenter' && !notes.every((e) => e.classList.contains('active'))) return false;
      await Promise.all([...slide.querySelectorAll('img')].map((img) => img.decode().catch(() => {})));
      await document.fonts.ready;
      return true;
    }, { timeout: ms }, n);
    return '';
  } catch (e) {
    if (e.name !== 'TimeoutError') throw e;
    const at = await page.evaluate(() => location.hash);
    return `slide ${n} was not on screen after ${ms} ms (the page is at '${at}')`;
  }
}

async function check_html() {
  const { default: puppeteer } = await import(path.join(slides_dir, 'node_modules', 'puppeteer-core', 'lib', 'esm', 'puppeteer', 'puppeteer-core.js'));
  const m = manifest();
  const browser = await puppeteer.launch({ executablePath: chrome_path(), headless: true,
                                           args: ['--no-sandbox', '--disable-gpu', '--font-render-hinting=none'] });
  const shots = path.join(out, 'screens');
  fs.mkdirSync(shots, { recursive: true });
  let figures_seen = 0;
  try {
    for (const [name, d] of Object.entries(m.decks)) {
      const page = await browser.newPage();
      await page.setViewport({ width: 1280, height: 720 });
      await page.setRequestInterception(true);
      const errors = [];
      page.on('request', (req) => {
        if (req.url().startsWith('file:') || req.url().startsWith('data:') || req.url().startsWith('about:')) req.continue();
        else { errors.push(`asked the network for ${req.url()}`); req.abort(); }
      });
      page.on('requestfailed', (req) => { if (req.url().startsWith('file:')) errors.push(`failed to load ${req.url()}`); });
      page.on('console', (msg) => { if (msg.type() === 'error') errors.push(`console error: ${msg.text()}`); });
      page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
      await page.goto(`file://${path.join(out, d.html)}`, { waitUntil: 'load' });
      await page.evaluate(() => document.fonts.ready);
      const report = await page.evaluate(() => {
        const slides = [...document.querySelectorAll('svg[data-marpit-svg] > foreignObject > section')];
        return {
          slides: slides.length,
          overflow: slides.flatMap((s, i) => {
            const found = [];
            if (s.scrollHeight > s.clientHeight + 2) found.push(`slide ${i + 1} is ${s.scrollHeight - s.clientHeight} px too tall`);
            for (const pre of s.querySelectorAll('pre'))
              if (pre.scrollWidth > pre.clientWidth + 2) found.push(`slide ${i + 1}: a block is ${pre.scrollWidth - pre.clientWidth} px too wide`);
            for (const img of s.querySelectorAll('img'))
              if (!img.complete || img.naturalWidth === 0) found.push(`slide ${i + 1}: image ${img.getAttribute('src')} did not load`);
            return found;
          }),
          small_code: [...document.querySelectorAll('pre')].map((p) => parseFloat(getComputedStyle(p).fontSize)).filter((px) => px < 20),
          blocks: [...document.querySelectorAll('section pre')].map((p) => p.textContent.replace(/\n$/, '')),
          notes: [...document.querySelectorAll('.bespoke-marp-note')].map((n) => ({ index: n.dataset.index, text: n.textContent.trim() })),
          figure: slides.findIndex((s) => [...s.querySelectorAll('img')].some((i) => /\.png$/.test(i.getAttribute('src')))),
        };
      });
      for (const e of errors) problem(`${name}.html: ${e}`);
      if (report.slides !== d.slides) problem(`${name}.html shows ${report.slides} slides, the deck has ${d.slides}`);
      for (const o of report.overflow) problem(`${name}.html: ${o}`);
      if (report.small_code.length) problem(`${name}.html: code set in ${Math.min(...report.small_code)} px (at least 20)`);
      const known = new Set(m.artefacts.filter((a) => a.deck === name && a.text_sha256).map((a) => a.text_sha256));
      for (const block of report.blocks)
        if (!known.has(sha256(block))) problem(`${name}.html: a block this build did not make: "${block.split('\n')[0].slice(0, 60)}"`);
      const with_notes = new Set(report.notes.filter((n) => n.text).map((n) => Number(n.index)));
      for (let i = 0; i < d.slides; ++i) if (!with_notes.has(i)) problem(`${name}.html: slide ${i + 1} has no speaker notes`);
      // The first slide with a figure, on screen: the pixels where the image
      // sits are the figure's.
      if (report.figure >= 0) {
        await page.evaluate((n) => { location.hash = `#${n}`; }, report.figure + 1);
        const missing = await until_slide(page, report.figure + 1);
        if (missing) problem(`${name}.html: ${missing}`);
        else {
          const box = await page.evaluate((n) => {
            const img = [...document.querySelectorAll('svg[data-marpit-svg] > foreignObject > section')][n].querySelector('img[src$=".png"]');
            const r = img.getBoundingClientRect();
            return { x: r.x, y: r.y, width: r.width, height: r.height, src: img.getAttribute('src') };
          }, report.figure);
          const shot = path.join(shots, `${name}.png`);
          await page.screenshot({ path: shot });
          const crop = `${shot}.crop.png`;
          const clip = { x: Math.round(box.x), y: Math.round(box.y), width: Math.round(box.width), height: Math.round(box.height) };
          await page.screenshot({ path: crop, clip });
          const distance = image_distance(crop, path.join(out, decodeURI(box.src)), clip.width, clip.height);
          if (!(distance < 0.12)) problem(`${name}.html slide ${report.figure + 1}: the screen shows something else than ${box.src} (distance ${distance.toFixed(3)})`);
          else ++figures_seen;
          for (const f of [crop, `${crop}.figure.png`]) fs.rmSync(f, { force: true });
        }
      }
      // The presenter view (what the instructor's screen shows): the slide's
      // notes, and the arrow key moves both the slide and the notes on.
      await page.goto(`file://${path.join(out, d.html)}?view=presenter#1`, { waitUntil: 'load' });
      const presenter = async () => page.evaluate(() => ({
        view: document.body.dataset.bespokeView, hash: location.hash,
        note: document.querySelector('.bespoke-marp-presenter-note-container')?.innerText ?? '' }));
      const opened = await until_slide(page, 1);
      if (opened) problem(`${name}.html?view=presenter: ${opened}`);
      const first = await presenter();
      await page.keyboard.press('ArrowRight');
      const moved = d.slides > 1 ? await until_slide(page, 2) : '';
      const second = await presenter();
      const note_of = (i) => report.notes.find((n) => Number(n.index) === i)?.text ?? '\0';
      if (first.view !== 'presenter') problem(`${name}.html?view=presenter does not open the presenter view`);
      else if (!first.note.includes(note_of(0).split('\n')[0])) problem(`${name}.html: the presenter view does not show slide 1's notes`);
      else if (d.slides > 1 && (second.hash !== '#2' || !second.note.includes(note_of(1).split('\n')[0])))
        problem(`${name}.html: the arrow key in the presenter view did not move to slide 2 and its notes (at ${second.hash}${moved ? `: ${moved}` : ''})`);
      await page.close();
      console.log(`check: ${name}.html: ${report.slides} slides, ${report.blocks.length} blocks, ${errors.length} errors, presenter view ok`);
    }
  } finally {
    await browser.close();
  }
  if (!figures_seen) problem('no deck showed a figure on screen');
}

// ---- notes ---------------------------------------------------------------------

const help_cache = new Map();

// The flags a built program's --help lists (a subcommand's own --help for
// `program SUBCOMMAND`), the subcommands it lists, and whether one may be
// left out (CLI11's usage line says "[SUBCOMMAND]" then: distlab-plan).
function help_of(program, sub) {
  const key = `${program} ${sub ?? ''}`;
  if (!help_cache.has(key)) {
    const r = run(program, [...(sub ? [sub] : []), '--help']);
    const text = `${r.stdout}${r.stderr}`;
    const flags = new Set([...text.matchAll(/(?:^|[\s,[|])(--?[A-Za-z][\w-]*)/gm)].map((x) => x[1]));
    const subs = new Set([...(text.split(/^Subcommands:$/m)[1] ?? '').matchAll(/^ {2}([a-z][\w-]*)\s/gm)].map((x) => x[1]));
    const optional = /\[SUBCOMMAND\]/.test(text);
    help_cache.set(key, r.status === 0 ? { flags, subs, optional } : null);
  }
  return help_cache.get(key);
}

function check_command(deck, slide, line) {
  const words = split_words(line);
  const programs = programs_of(words);
  // torchrun and mpirun start a built program: its words are checked.
  if (['torchrun', '/usr/bin/torchrun', 'mpirun'].includes(words[0])) {
    const i = words.findIndex((w) => w.startsWith('build/'));
    if (i < 0) return problem(`${deck} slide ${slide}: "${line}" starts no built program`);
    return check_command(deck, slide, words.slice(i).join(' '));
  }
  programs.forEach(({ index, word }, k) => {
    if (!word.startsWith('build/')) return problem(`${deck} slide ${slide}: "${word}" is not a program of the build (write build/...)`);
    const program = map_to_build(word, build_dir);
    if (!fs.existsSync(program)) return problem(`${deck} slide ${slide}: ${word} does not exist in the build`);
    let help = help_of(program);
    if (!help) return problem(`${deck} slide ${slide}: ${word} --help failed`);
    let first = index + 1;
    if (help.subs.size && !(help.optional && !help.subs.has(words[first]))) {
      const sub = words[first];
      if (!help.subs.has(sub)) return problem(`${deck} slide ${slide}: ${word} has no subcommand ${sub}`);
      help = help_of(program, sub);
      ++first;
    }
    const end = k + 1 < programs.length ? programs[k + 1].index - 1 : words.length;
    for (const w of words.slice(first, end)) {
      const flag = w.match(/^(--?[A-Za-z][\w-]*)(=.*)?$/)?.[1];
      if (flag && !help.flags.has(flag)) problem(`${deck} slide ${slide}: ${word} has no flag ${flag}`);
    }
  });
}

function check_notes() {
  const m = manifest();
  let commands = 0;
  for (const name of Object.keys(m.decks)) {
    const md = fs.readFileSync(path.join(out, `${name}.md`), 'utf8');
    const slides = md.replace(/^---\n[\s\S]*?\n---\n/, '').split(/\n---\n/);  // past the front matter
    slides.forEach((slide, i) => {
      for (const [, note] of slide.matchAll(/<!--([\s\S]*?)-->/g))
        for (const line of note.split('\n')) {
          const c = line.match(/^\s*\$ (.+)$/);
          if (c) { ++commands; check_command(name, i + 1, c[1].trim()); }
        }
    });
  }
  if (!commands) problem('no command in any speaker note');
  console.log(`check: ${commands} commands in the notes`);
}

// ---- main ----------------------------------------------------------------------

const checks = { decks: check_decks, manifest: check_manifest, pdf: check_pdf, html: check_html, notes: check_notes };
if (!checks[what]) {
  console.error(`usage: node slides/tools/check.mjs ${Object.keys(checks).join('|')} [--build-dir DIR]`);
  process.exit(2);
}
await checks[what]();
for (const p of problems) console.error(`check ${what}: ${p}`);
if (problems.length) process.exit(1);
console.log(`check ${what}: ok`);
