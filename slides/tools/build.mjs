// Builds the class's slides from DistLab itself, into BUILD/slides/:
//   every terminal excerpt is captured from a real run of a built program,
//   every figure is a distlab-viz screenshot or a plot of a run's numbers,
//   every code excerpt is cut from the sources, all at this build;
// then Marp turns each deck into HTML (presenter view with the notes) and a
// PDF (through Debian's chromium), and index.html links them. manifest.json
// lists every artefact with its command or source and its hash: the slide
// checks (check.mjs) hold the decks to it.
//
//   node slides/tools/build.mjs [--build-dir build] [--out DIR] [--only 03_broadcast,..] [--no-pdf] [--reuse]
//
// --reuse takes a run's output from the last build when its command is the
// same (for writing a deck; the manifest says so and the checks refuse it).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cut_excerpt, language_of } from './code_excerpt.mjs';
import { build_dir_from, chrome_path, deck_files, decks_dir, map_to_build, out_dir_or_exit, read_json, repo_root, sha256, slides_dir,
         split_words } from './common.mjs';
import { DeckError, read_deck } from './deck.mjs';
import { page_query } from './page_query.mjs';
import { plot_svg, rows_from_output } from './plot_svg.mjs';

const args = process.argv.slice(2);
const build_dir = build_dir_from(args);
const out = out_dir_or_exit(args, build_dir);
const only = args.includes('--only') ? args[args.indexOf('--only') + 1].split(',') : null;
const want_pdf = !args.includes('--no-pdf');
const reuse = args.includes('--reuse');
const kRunTimeoutS = 600;
const kMaxExcerptLines = 22;  // 22 lines of 20 px code fill a 720 px slide under its title

function log(message) {
  process.stdout.write(`slides: ${message}\n`);
}

class BuildError extends Error {}

// ---- artefacts ---------------------------------------------------------

const previous = reuse && fs.existsSync(path.join(out, 'manifest.json')) ? read_json(path.join(out, 'manifest.json')) : null;

// Runs one command (words already split) in the deck's work folder; returns
// what it printed on stdout and stderr, interleaved as written. It must end
// with status `exit` (0 unless the deck declares `run NAME exit=N:`).
function run_command(deck, name, command, exit = 0) {
  const words = split_words(command).map((w) => map_to_build(w, build_dir));
  const work = path.join(out, 'work', deck);
  fs.mkdirSync(work, { recursive: true });
  const log_file = path.join(out, 'runs', `${deck}.${name}.log`);
  fs.mkdirSync(path.dirname(log_file), { recursive: true });
  const fd = fs.openSync(log_file, 'w');
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('DISTLAB_')));
  const start = Date.now();
  const result = spawnSync(words[0], words.slice(1), {
    cwd: work, env, stdio: ['ignore', fd, fd], timeout: kRunTimeoutS * 1000, killSignal: 'SIGKILL',
  });
  fs.closeSync(fd);
  const seconds = (Date.now() - start) / 1000;
  const output = fs.readFileSync(log_file, 'utf8').replace(/\x1b\[[0-9;]*m/g, '');
  if (result.error || result.status !== exit) {
    const why = result.error ? result.error.message : result.signal ? `killed by ${result.signal}` :
      `exit ${result.status}${exit ? `, not the ${exit} the deck declares` : ''}`;
    throw new BuildError(`${deck}: '${name}' failed (${why}): ${command}\n${output.split('\n').slice(-15).join('\n')}`);
  }
  return { output, seconds };
}

function make_artefacts(deck, artefacts, manifest) {
  const made = new Map();
  const figures = path.join(out, 'figures', deck);
  fs.mkdirSync(figures, { recursive: true });
  for (const a of artefacts.values()) {
    if (a.kind === 'run') {
      const old = previous?.artefacts.find((e) => e.deck === deck && e.name === a.name && e.kind === 'run' && e.command === a.command &&
                                                 (e.exit ?? 0) === a.exit);
      let output, seconds, reused = false;
      if (old && fs.existsSync(path.join(out, old.file))) {
        output = fs.readFileSync(path.join(out, old.file), 'utf8');
        seconds = old.seconds;
        reused = true;
      } else {
        ({ output, seconds } = run_command(deck, a.name, a.command, a.exit));
      }
      const file = `runs/${deck}.${a.name}.txt`;
      fs.writeFileSync(path.join(out, file), output);
      made.set(a.name, { ...a, output });
      manifest.artefacts.push({ deck, name: a.name, kind: 'run', command: a.command, exit: a.exit, file, sha256: sha256(output),
                                seconds, reused });
      log(`${deck}: run ${a.name} (${reused ? 'reused' : `${seconds.toFixed(1)} s`})`);
    } else if (a.kind === 'viz') {
      const file = `figures/${deck}/${a.name}.png`;
      const words = split_words(a.command);
      const extra = ['--screenshot', path.join(out, file)];
      // A slide's size, and type large enough to read there, unless the deck says otherwise.
      if (!words.includes('--width')) extra.push('--width', '1280');
      if (!words.includes('--height')) extra.push('--height', '720');
      if (!words.includes('--scale')) extra.push('--scale', '1.25');
      const { seconds } = run_command(deck, a.name, `${a.command} ${extra.map((w) => `"${w}"`).join(' ')}`);
      const png = fs.readFileSync(path.join(out, file));
      made.set(a.name, { ...a, file });
      manifest.artefacts.push({ deck, name: a.name, kind: 'figure', command: a.command, file, sha256: sha256(png), seconds });
      log(`${deck}: figure ${a.name} (${seconds.toFixed(1)} s)`);
    }
  }
  // Plots last: they read the runs' output.
  for (const a of artefacts.values()) {
    if (a.kind !== 'plot') continue;
    const run = made.get(a.run);
    if (!run || run.kind !== 'run') throw new BuildError(`${deck}: plot '${a.name}' reads run '${a.run}', which is not a run of this deck`);
    const x = Number(a.options.x ?? 1);
    const ys = (a.options.y ?? '2').split(',').map(Number);
    const rows = rows_from_output(run.output, a.regex, x, ys);
    let svg;
    try {
      svg = plot_svg(rows, { xlabel: a.options.xlabel, ylabel: a.options.ylabel, legend: a.options.legend?.split(','),
                             logx: a.flags.includes('logx'), ymin0: a.flags.includes('ymin0') });
    } catch (e) {
      throw new BuildError(`${deck}: plot '${a.name}' of run '${a.run}': ${e.message}`);
    }
    const file = `figures/${deck}/${a.name}.svg`;
    fs.writeFileSync(path.join(out, file), svg);
    made.set(a.name, { ...a, file });
    manifest.artefacts.push({ deck, name: a.name, kind: 'plot', command: `rows /${a.regex}/ of run ${a.run}`, from_run: a.run,
                              file, sha256: sha256(svg), rows: rows.length });
    log(`${deck}: plot ${a.name} (${rows.length} points)`);
  }
  return made;
}

// ---- directives --------------------------------------------------------

// The lines of a run's output that an @output directive asks for.
function select_output(deck, output, spec) {
  let lines = output.replace(/\n+$/, '').split('\n');
  const { options } = spec;
  if (options.from !== undefined) {
    const i = lines.findIndex((l) => l.includes(options.from));
    if (i < 0) throw new BuildError(`${deck}: @output ${spec.name}: no line contains "${options.from}"`);
    lines = lines.slice(i);
  }
  if (options.to !== undefined) {
    const i = lines.findIndex((l) => l.includes(options.to));
    if (i < 0) throw new BuildError(`${deck}: @output ${spec.name}: no line contains "${options.to}" after the start`);
    lines = lines.slice(0, i + 1);
  }
  if (options.grep !== undefined) {
    const any = options.grep.split('|');
    lines = lines.filter((l) => any.some((g) => l.includes(g)));
  }
  if (options.lines !== undefined) {
    const [a, b] = options.lines.split('-').map(Number);
    lines = lines.slice(a - 1, b);
  }
  if (!lines.length) throw new BuildError(`${deck}: @output ${spec.name} selects no line`);
  lines = lines.map((l) => l.replace(/\s+$/, ''));
  // cut N: a line longer than N characters ends in '…' at N (what a slide can show).
  if (options.cut !== undefined) lines = lines.map((l) => (l.length > Number(options.cut) ? `${l.slice(0, Number(options.cut) - 1)}…` : l));
  return lines.join('\n');
}

// `@output main from "a" to "b"`: the words after the directive, with
// "from X" style pairs read as options.
function directive_words(rest) {
  const words = split_words(rest);
  const positional = [], options = {};
  for (let i = 0; i < words.length; ++i) {
    if (['from', 'to', 'grep', 'lines', 'cut'].includes(words[i]) && i + 1 < words.length) options[words[i]] = words[++i];
    else positional.push(words[i]);
  }
  return { positional, options };
}

function fenced(language, text) {
  const fence = text.includes('```') ? '~~~~' : '```';
  return `${fence}${language}\n${text}\n${fence}`;
}

function expand_slide_line(deck, line, made, manifest, used) {
  const m = line.match(/^@(output|command|figure|plot|code)\s+(.*)$/);
  if (!m) return line;
  const [, kind, rest] = m;
  const { positional, options } = directive_words(rest);
  const artefact = (name, kinds) => {
    const a = made.get(name);
    if (!a || !kinds.includes(a.kind)) throw new BuildError(`${deck}: @${kind} ${name}: no ${kinds.join('/')} of that name`);
    used.add(name);
    return a;
  };
  const record = (entry, text) => {
    manifest.artefacts.push({ deck, kind: entry.kind, ...entry, text_sha256: sha256(text) });
    if (text.split('\n').length > kMaxExcerptLines)
      throw new BuildError(`${deck}: @${kind} ${rest}: ${text.split('\n').length} lines, more than ${kMaxExcerptLines} fit a slide`);
  };
  if (kind === 'output') {
    const a = artefact(positional[0], ['run']);
    const text = select_output(deck, a.output, { name: a.name, options });
    record({ kind: 'output', name: a.name, command: a.command, select: options }, text);
    return fenced('text', text);
  }
  if (kind === 'command') {
    const a = artefact(positional[0], ['run', 'viz']);
    const text = `$ ${a.command}`;
    record({ kind: 'command', name: a.name, command: a.command }, text);
    return fenced('console', text);
  }
  if (kind === 'figure' || kind === 'plot') {
    const a = artefact(positional[0], kind === 'figure' ? ['viz'] : ['plot']);
    const rest_words = positional.slice(1).filter((w) => w !== 'live');
    if (rest_words.length < positional.length - 1) {
      if (kind !== 'figure') throw new BuildError(`${deck}: @plot ${rest}: only a figure can be live`);
      return live_figure(deck, a, rest_words[0], manifest);
    }
    const size = rest_words[0] ? `${rest_words[0]} ` : '';
    return `![${size}${a.name}](${a.file})`;
  }
  // @code PATH SYMBOL | @code PATH from "a" to "b"
  const [rel_path, ...symbol] = positional;
  const spec = options.from !== undefined ? { from: options.from, to: options.to } : { symbol: symbol.join(' ') };
  if (!rel_path || (!spec.symbol && spec.from === undefined))
    throw new BuildError(`${deck}: "@code ${rest}": write @code PATH SYMBOL or @code PATH from "a" to "b"`);
  let excerpt;
  try {
    excerpt = cut_excerpt(repo_root, rel_path, spec);
  } catch (e) {
    throw new BuildError(`${deck}: ${e.message}`);
  }
  record({ kind: 'code', file: rel_path, spec, lines: [excerpt.first, excerpt.last] }, excerpt.text);
  return `<p class="where">${rel_path}:${excerpt.first}-${excerpt.last}</p>\n\n${fenced(language_of(rel_path), excerpt.text)}`;
}

// `@figure VIZ live`: the still, which becomes the visualizer itself,
// running in the slide, when the deck is served over HTTP beside the site
// (node viz/web/serve.mjs serves the decks under /slides/, the site at /).
// Opened as a file, and in the PDF, the deck shows the still, a link to the
// page around it (kLiveScript makes the swap).
function live_figure(deck, a, size, manifest) {
  const height = size === undefined ? 520 : Number((size.match(/^h:(\d+)$/) || [])[1]);
  if (!height) throw new BuildError(`${deck}: @figure ${a.name} ${size} live: a live figure's size is h:PIXELS`);
  let query;
  try {
    query = page_query(deck, split_words(a.command).slice(1));
  } catch (e) {
    throw new BuildError(`${deck}: @figure ${a.name} live: ${e.message}`);
  }
  const page = `../index.html${query}`;
  manifest.artefacts.push({ deck, kind: 'live', name: a.name, command: a.command, page });
  return `<figure class="live" style="height: ${height}px" data-page="${page}"><a href="${page}" target="_blank">` +
         `<img src="${a.file}" alt="${a.name}"></a></figure>`;
}

const kLiveScript = `<script>
if (location.protocol === 'http:' || location.protocol === 'https:')
  for (const figure of document.querySelectorAll('figure.live')) {
    const frame = document.createElement('iframe');
    frame.src = figure.dataset.page;
    frame.title = figure.querySelector('img').alt;
    frame.loading = 'lazy';
    figure.replaceChildren(frame);
  }
</script>`;

// In notes: `@live RUN [more flags]` is the run's command, to type in class.
function expand_note_line(deck, line, made, used) {
  const m = line.match(/^(\s*)@live\s+([a-z0-9_]+)(.*)$/);
  if (!m) return line;
  const a = made.get(m[2]);
  if (!a || (a.kind !== 'run' && a.kind !== 'viz')) throw new BuildError(`${deck}: @live ${m[2]}: no run or viz of that name`);
  used.add(m[2]);
  return `${m[1]}$ ${a.command}${m[3]}`;
}

function expand_deck(name, deck, made, manifest) {
  const used = new Set();
  const slides = deck.slides.map((slide) => {
    let in_notes = false;
    return slide.body.map((line) => {
      const opens = /^\s*<!--/.test(line) && !/^\s*<!--\s*_?[a-zA-Z]+\s*:.*-->\s*$/.test(line);
      if (opens) in_notes = true;
      const expanded = in_notes ? expand_note_line(name, line, made, used) : expand_slide_line(name, line, made, manifest, used);
      if (in_notes && line.includes('-->')) in_notes = false;
      return expanded;
    }).join('\n');
  });
  // Every artefact is shown: by a directive, in the notes, or (a run) through a plot.
  const plotted = new Set([...deck.artefacts.values()].filter((a) => a.kind === 'plot').map((a) => a.run));
  for (const a of deck.artefacts.values())
    if (!used.has(a.name) && !plotted.has(a.name)) throw new BuildError(`${name}: artefact '${a.name}' is made but no slide shows it`);
  // The swap of live figures, once, at the end of the last slide.
  if (manifest.artefacts.some((e) => e.deck === name && e.kind === 'live')) slides[slides.length - 1] += `\n\n${kLiveScript}`;
  const header = deck.meta.lesson ? `DistLab · lesson ${deck.meta.lesson.slice(0, 2)} · ${deck.meta.title}` : `DistLab · ${deck.meta.title}`;
  const front = ['---', 'marp: true', 'theme: distlab', 'paginate: true', `title: "${deck.meta.title}"`, `header: "${header}"`, '---', ''];
  return front.join('\n') + slides.join('\n\n---\n\n') + '\n';
}

// ---- Marp ----------------------------------------------------------------

function marp(files, extra) {
  const bin = path.join(slides_dir, 'node_modules', '.bin', 'marp');
  if (!fs.existsSync(bin)) throw new BuildError('Marp is not installed: run scripts/slides.sh (it runs npm ci in slides/)');
  const result = spawnSync(bin, ['--no-config-file', '--theme-set', path.join(slides_dir, 'theme', 'distlab.css'), '--html',
                                 '--bespoke.progress', '-P', '2', ...extra, ...files],
                           { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', env: { ...process.env, CHROME_PATH: extra.includes('--pdf') ? chrome_path() : '' } });
  if (result.status !== 0) throw new BuildError(`marp ${extra.join(' ')} failed:\n${result.stdout}${result.stderr}`);
}

function write_index(decks) {
  const rows = decks.map((d) => `    <li><a href="${d.name}.html">${d.label}</a>` +
    (d.pdf ? ` <span class="pdf">(<a href="${d.name}.pdf">PDF</a>)</span>` : '') + ` <span class="n">${d.slides} slides</span></li>`).join('\n');
  const html = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>DistLab: the class's slides</title>
<style>
  body { font-family: 'DejaVu Sans', sans-serif; background: #fbfaf7; color: #1d232a; max-width: 56em; margin: 3em auto; font-size: 20px; }
  h1 { color: #0d4f8b; border-bottom: 4px solid #42a5f5; }
  li { margin: 0.4em 0; }
  a { color: #0d4f8b; }
  .pdf, .n { color: #6b7580; font-size: 0.85em; }
</style>
</head>
<body>
<h1>DistLab: the class's slides</h1>
<p>One deck per lesson, built from DistLab's own runs. Open a deck, press <b>f</b> for full screen and
<b>p</b> for the presenter view with the speaker notes; the arrow keys step through the slides.</p>
<ol start="0">
${rows}
</ol>
</body>
</html>
`;
  fs.writeFileSync(path.join(out, 'index.html'), html);
}

// ---- main ------------------------------------------------------------------

function main() {
  const started = new Date();
  const names = deck_files().map((f) => f.replace(/\.md$/, '')).filter((n) => !only || only.includes(n));
  if (!names.length) throw new BuildError(`no deck to build in ${decks_dir}${only ? ` named ${only.join(', ')}` : ''}`);
  // Nothing of an earlier build survives, except, for --reuse, the runs'
  // outputs and the files they wrote (traces the figures open).
  for (const entry of fs.existsSync(out) ? fs.readdirSync(out) : [])
    if (!(reuse && (entry === 'runs' || entry === 'work'))) fs.rmSync(path.join(out, entry), { recursive: true, force: true });
  fs.mkdirSync(out, { recursive: true });
  const manifest = { build_id: sha256(`${started.toISOString()}:${process.pid}`).slice(0, 16), started: started.toISOString(),
                     build_dir: path.relative(repo_root, build_dir) || '.', decks: {}, artefacts: [] };
  const md_files = [];
  for (const name of names) {
    const deck = read_deck(path.join(decks_dir, `${name}.md`), `slides/decks/${name}.md`);
    const made = make_artefacts(name, deck.artefacts, manifest);
    const md = expand_deck(name, deck, made, manifest);
    const md_file = path.join(out, `${name}.md`);
    fs.writeFileSync(md_file, md);
    md_files.push(md_file);
    manifest.decks[name] = { title: deck.meta.title, lesson: deck.meta.lesson ?? null, slides: deck.slides.length,
                             titles: deck.slides.map((s) => s.title), html: `${name}.html`, pdf: want_pdf ? `${name}.pdf` : null };
  }
  log(`marp: ${md_files.length} HTML deck(s)`);
  marp(md_files, []);
  if (want_pdf) {
    log(`marp: ${md_files.length} PDF(s) through ${chrome_path()}`);
    marp(md_files, ['--pdf', '--pdf-notes', '--allow-local-files']);
  }
  for (const [name, d] of Object.entries(manifest.decks)) {
    d.html_sha256 = sha256(fs.readFileSync(path.join(out, d.html)));
    if (d.pdf) d.pdf_sha256 = sha256(fs.readFileSync(path.join(out, d.pdf)));
    d.md_sha256 = sha256(fs.readFileSync(path.join(out, `${name}.md`)));
  }
  write_index(Object.entries(manifest.decks).map(([name, d]) => ({
    name, slides: d.slides, pdf: d.pdf, label: d.lesson ? `Lesson ${d.lesson.slice(0, 2)}: ${d.title}` : d.title })));
  manifest.finished = new Date().toISOString();
  fs.writeFileSync(path.join(out, 'manifest.json'), JSON.stringify(manifest, null, 1) + '\n');
  const seconds = (Date.now() - started.getTime()) / 1000;
  log(`${names.length} deck(s), ${manifest.artefacts.length} artefacts, ${seconds.toFixed(0)} s: open ${path.relative(process.cwd(), path.join(out, 'index.html'))}`);
}

try {
  main();
} catch (e) {
  if (e instanceof BuildError || e instanceof DeckError) {
    process.stderr.write(`slides: ${e.message}\n`);
    process.exit(1);
  }
  throw e;
}
