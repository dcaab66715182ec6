// The visualizer in a browser, checked in Debian's headless chromium against
// the native program (tests/web/CMakeLists.txt registers one ctest per check):
//
//   node tests/web/check.mjs CHECK --build-dir build
//     load     the page draws its first frame with no error in the console
//     panels   every panel draws (frames go on, no error in the page); a plan
//              record by ?panel=plan&plan=URL, dropped on a page, and each one
//              the site holds (plans/): the Plan panel holds its layouts; then the
//              keys a presenter uses, pressed on the page: on the collectives
//              panel the right arrow steps the ring all-reduce's time cursor to
//              the next step boundary (its steps take equal times), the left one
//              back, and space plays, then pauses
//     pixels   collectives, pipeline and trace: the canvas against
//              `distlab-viz --screenshot` of the same view, at most kMaxDiffShare
//              of the pixels differing by more than kFuzz
//     traces   a trace by ?trace=URL and by a dropped file: the events per rank
//              and lane the page holds equal those counted here from the JSON;
//              a hang's trace and flight-recorder files, by URL and dropped
//              together: the trace likewise, and every flight file read
//     bad      a truncated trace, a file that is not JSON, an unknown panel, a
//              plan record of another version, one cut short, one not found: a
//              message in the page, and the page still draws
//     live     lesson 05 run with --live into the server while two pages watch,
//              a third closes mid-run and a WebSocket client never reads: each
//              page ends with as many events as the run's trace file holds, the
//              run ends as it does unwatched (exit 0, nothing dropped), and a
//              page opened after the run is sent all of it; then a second run:
//              a page open across both holds both, one opened after it only the
//              second, and the server said each run's beginning and end
//     deck     lesson 05's deck served beside the site: its live figure is the
//              page itself, at the address of the figure's view, drawing in the
//              slide; the same deck opened as a file keeps the still
//
// The site is build/web/site (scripts/web.sh); the server is viz/web/serve.mjs,
// on free ports, serving a folder that holds the site and this check's traces.
import { spawnSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { start } from '../../viz/web/serve.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const kWidth = 1280;
const kHeight = 720;
const kFuzz = '12%';          // a pixel differs when a channel differs by more than this
const kMaxDiffShare = 0.02;   // of the canvas' pixels (text is antialiased by two rasterizers)
const kCheckLimitMs = 240000; // a whole check, under ctest's TIMEOUT of 300 s

const check = process.argv[2];
const build_dir = path.resolve(process.argv[process.argv.indexOf('--build-dir') + 1] || 'build');
const site = path.join(build_dir, 'web', 'site');
const viz = path.join(build_dir, 'viz', 'distlab-viz');
const work = fs.mkdtempSync(path.join(os.tmpdir(), `distlab-web-${check}-`));
const problems = [];
const problem = (text) => { problems.push(text); console.log(`FAIL: ${text}`); };
const note = (text) => console.log(text);

function chrome_path() {
  if (process.env.CHROME_PATH) return process.env.CHROME_PATH;
  for (const p of ['/usr/bin/chromium', '/usr/bin/chromium-browser']) if (fs.existsSync(p)) return p;
  throw new Error("no chromium: install Debian's chromium (scripts/setup.sh does)");
}

// The folder served: the site's files, linked, and the check's own traces.
function served_folder() {
  const dir = path.join(work, 'site');
  fs.mkdirSync(path.join(dir, 'check'), { recursive: true });
  for (const f of ['index.html', 'distlab-viz.js', 'distlab-viz.wasm', 'distlab-viz.data'])
    fs.symlinkSync(path.join(site, f), path.join(dir, f));
  if (fs.existsSync(path.join(site, 'plans'))) fs.symlinkSync(path.join(site, 'plans'), path.join(dir, 'plans'));
  return dir;
}

async function launch() {
  const { default: puppeteer } = await import(path.join(root, 'slides', 'node_modules', 'puppeteer-core', 'lib', 'esm',
                                                        'puppeteer', 'puppeteer-core.js'));
  // WebGL 2 in a headless browser with no GPU: SwiftShader.
  return puppeteer.launch({ executablePath: chrome_path(), headless: true,
                            args: ['--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
                                   '--font-render-hinting=none', '--hide-scrollbars'] });
}

// A page at `query`, its console errors collected, once its first frame is drawn.
async function open_page(browser, base, query, { wait_drawn = true, ratio = 1 } = {}) {
  const page = await browser.newPage();
  // ratio: device pixels per CSS pixel; the page is kWidth x kHeight device pixels either way.
  await page.setViewport({ width: kWidth / ratio, height: kHeight / ratio, deviceScaleFactor: ratio });
  page.errors = [];
  page.on('console', (m) => { if (m.type() === 'error') page.errors.push(`console error: ${m.text()}`); });
  page.on('pageerror', (e) => page.errors.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => page.errors.push(`failed to load ${r.url()}`));
  await page.goto(`${base}/${query}`, { waitUntil: 'load' });
  if (wait_drawn) await page.waitForFunction(() => document.body.dataset.drawn === '1', { timeout: 30000 });
  return page;
}

const counts = (page) => page.evaluate(() => window.distlab.counts());
const page_messages = (page) => page.evaluate(() => window.distlab.messages);

// Frames still being drawn: the tab is alive. (A tab in the background
// draws no frames: the browser stops its animation frames.)
async function still_drawing(page) {
  await page.bringToFront();
  const before = (await counts(page)).frames;
  await page.waitForFunction((n) => window.distlab.counts().frames > n + 2, { timeout: 10000 }, before);
}

// The page at another devicePixelRatio (zoomed, or moved to another
// screen), once it has drawn a few frames at it.
async function rescaled(page, ratio) {
  await page.bringToFront();  // a page behind another draws no frame
  await page.setViewport({ width: kWidth / ratio, height: kHeight / ratio, deviceScaleFactor: ratio });
  await page.waitForFunction((r) => window.distlab.counts().ratio === r, { timeout: 10000 }, ratio);
  await still_drawing(page);
}

// Events per "rank/lane" counted straight from the JSON (X events; the lane
// is the event's args.lane, as the library's sink writes it).
function json_counts(file) {
  const found = {};
  for (const e of JSON.parse(fs.readFileSync(file, 'utf8')).traceEvents) {
    if (e.ph !== 'X') continue;
    const key = `${e.pid}/${(e.args && e.args.lane) || ''}`;
    found[key] = (found[key] || 0) + 1;
  }
  return found;
}
function page_row_counts(c) {
  const found = {};
  for (const r of c.rows) found[`${r.rank}/${r.lane}`] = r.events;
  return found;
}
function same_counts(what, got, want) {
  const keys = [...new Set([...Object.keys(got), ...Object.keys(want)])].sort();
  const differ = keys.filter((k) => got[k] !== want[k]);
  if (differ.length) problem(`${what}: rows differ: ${differ.map((k) => `${k} page ${got[k]} json ${want[k]}`).join(', ')}`);
  else note(`${what}: ${keys.length} rows, ${Object.values(want).reduce((a, b) => a + b, 0)} events, as in the JSON`);
}

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 120000, ...options });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

// A small real trace: lesson 05's all-reduces on 4 thread ranks.
function lesson_trace(name, extra = []) {
  const file = path.join(work, name);
  run(path.join(build_dir, 'lessons', 'lesson_05_all_reduce'),
      ['--backend', 'threads', '--ranks', '4', '--mb', '1', '--iters', '1', '--no-steps', '--trace', file, ...extra]);
  return file;
}

// The views compared with the native program: address and command line.
const kViews = [
  { name: 'collectives', query: '?panel=collectives&collective=all_reduce&algorithm=ring&ranks=8&step=2',
    args: ['--panel', 'collectives', '--collective', 'all_reduce', '--algorithms', 'ring', '--ranks', '8', '--step', '2'] },
  { name: 'pipeline', query: '?panel=pipeline&schedule=gpipe,1f1b&stages=4&microbatches=8',
    args: ['--panel', 'pipeline', '--schedule', 'gpipe,1f1b', '--stages', '4', '--microbatches', '8'] },
  { name: 'trace', query: '?panel=trace&trace=check/l5.json', trace: 'l5.json',
    args: ['--panel', 'trace'] },
  // High-DPI: at 2 device pixels per CSS pixel the page draws every device
  // pixel, text and widgets twice the size, as the native program does with
  // --scale 2 (blurry, an upscaled 640 x 360 canvas would differ).
  { name: 'pipeline at device pixel ratio 2', query: '?panel=pipeline&schedule=gpipe,1f1b&stages=4&microbatches=8',
    args: ['--panel', 'pipeline', '--schedule', 'gpipe,1f1b', '--stages', '4', '--microbatches', '8', '--scale', '2'],
    ratio: 2 },
];

async function check_pixels(browser, base, dir) {
  for (const v of kViews) {
    const args = [...v.args];
    if (v.trace) {
      const file = path.join(dir, 'check', v.trace);
      fs.copyFileSync(lesson_trace(v.trace), file);
      args.push('--trace', file);
    }
    const file = v.name.replace(/ /g, '_');
    const native = path.join(work, `${file}.native.png`);
    run(viz, [...args, '--width', String(kWidth), '--height', String(kHeight), '--screenshot', native]);
    const page = await open_page(browser, base, v.query, { ratio: v.ratio || 1 });
    await still_drawing(page);
    const canvas = await page.evaluate(() => {
      const c = document.getElementById('canvas');
      return { width: c.width, height: c.height, css_width: c.clientWidth, css_height: c.clientHeight };
    });
    const ratio = v.ratio || 1;
    if (canvas.width !== kWidth || canvas.height !== kHeight || canvas.css_width * ratio !== kWidth ||
        canvas.css_height * ratio !== kHeight)
      problem(`${v.name}: the canvas holds ${canvas.width} x ${canvas.height} pixels shown as ${canvas.css_width} x ` +
              `${canvas.css_height} CSS pixels; expected ${kWidth} x ${kHeight} shown as ${kWidth / ratio} x ${kHeight / ratio}`);
    const shot = path.join(work, `${file}.page.png`);
    await page.screenshot({ path: shot });
    const diff = path.join(work, `${file}.diff.png`);
    const r = spawnSync('compare', ['-metric', 'AE', '-fuzz', kFuzz, native, shot, diff], { encoding: 'utf8' });
    const differing = Number(r.stderr.trim().split(/\s/)[0]);
    const share = differing / (kWidth * kHeight);
    if (!Number.isFinite(share)) problem(`${v.name}: compare failed: ${r.stderr}`);
    else if (share > kMaxDiffShare) problem(`${v.name}: ${(share * 100).toFixed(2)}% of the pixels differ from the native render (at most ${kMaxDiffShare * 100}%); see ${diff}`);
    else note(`${v.name}: ${(share * 100).toFixed(2)}% of the pixels differ from the native render (at most ${kMaxDiffShare * 100}%)`);
    for (const e of page.errors) problem(`${v.name}: ${e}`);
    await page.close();
  }
}

const kPanels = ['collectives', 'trace', 'pipeline', 'ddp', 'memory', 'context', 'experts', 'wire', 'plan'];

// A plan record as distlab-plan --record writes one (planner/record.hpp):
// three layouts, two measured (one failed), one not run.
function plan_record() {
  const rank = (r, scale) => ({ pipeline_rank: r, parameters: 20e6 * scale, gradients: 20e6 * scale, gradient_shard: 0,
                                optimizer_state: 0, buffers: 20e6 * scale, activations: 9e6, backward_scratch: 2e6,
                                data: 5e6, data_setup: 7e6, total: 60e6 * scale + 16e6 });
  const layout = (place, name, pipeline, step_ms, measured) => ({
    place, name, command: `lesson_11_capstone --preset cpu --ranks 4 (${name})`, pipeline, replicas: 4 / pipeline,
    context: 1, tensor: 1,
    predicted: { step_ms, critical_ms: step_ms, packed_ms: step_ms, bubble: 0.1, wire_bytes: 1e7, mfu: 0.03, job_bytes: 3e8 },
    memory: [...Array(pipeline).keys()].map((r) => rank(r, 1 / pipeline)),
    ...(measured ? { measured } : {}),
  });
  return { format: 'distlab-plan', version: 1, preset: 'cpu', ranks: 4, batch: 20, bptt: 35,
           profile: { path: 'planner/profiles/vm.json', machine: 'vm (2 cores)', date: '2026-11-30', cores: 2, device: 'cpu' },
           accepted: 412, refused: 96, predict_seconds: 0.08,
           layouts: [
             layout(1, '1x4x1x1 1f1b m1 ddp none bf16', 1, 61, { ok: true, median_ms: 70.2, low_ms: 68, high_ms: 75.1,
                                                               steps_ms: [68, 70.2, 75.1], metered_bytes: 5.2e8, peak_rss_bytes: 9e8 }),
             layout(2, '2x2x1x1 1f1b m4 ddp none fp32', 2, 66.1, null),
             layout(7, '4x1x1x1 gpipe m8 none none fp32', 4, 70, { ok: false, error: 'rank 2: out of memory' }),
           ] };
}

async function check_panels(browser, base, dir) {
  for (const panel of kPanels) {
    const page = await open_page(browser, base, `?panel=${panel}`);
    await still_drawing(page);
    const c = await counts(page);
    const errors = (await page_messages(page)).filter((m) => m.kind === 'error');
    if (c.panel !== panel) problem(`${panel}: the page shows ${c.panel}`);
    for (const m of errors) problem(`${panel}: the page says: ${m.text}`);
    for (const e of page.errors) problem(`${panel}: ${e}`);
    if (c.panel === panel && !errors.length && !page.errors.length) note(`${panel}: drawn (${c.frames} frames)`);
    await page.close();
  }
  // Plan records: one by URL, the same dropped on a page, and those the site
  // holds; each opens in the Plan panel with every layout of its JSON.
  const record = plan_record();
  fs.writeFileSync(path.join(dir, 'check', 'plan.json'), JSON.stringify(record, null, 1));
  const plans = [{ what: 'plan by URL', query: '?panel=plan&plan=check/plan.json', json: record },
                 { what: 'plan dropped', query: '?panel=collectives', drop: 'plan.json', json: record }];
  const kept = path.join(site, 'plans');
  if (fs.existsSync(kept))
    for (const f of fs.readdirSync(kept).filter((f) => f.endsWith('.json')).sort())
      plans.push({ what: `plans/${f}`, query: `?plan=plans/${encodeURIComponent(f)}`,
                   json: JSON.parse(fs.readFileSync(path.join(kept, f), 'utf8')) });
  for (const p of plans) {
    const page = await open_page(browser, base, p.query);
    if (p.drop) await drop(page, [{ name: p.drop, url: `check/${p.drop}` }]);
    const want = p.json.layouts.length;
    await page.waitForFunction((n) => window.distlab.counts().plan_layouts === n, { timeout: 10000 }, want).catch(() => {});
    await still_drawing(page);
    const c = await counts(page);
    const errors = (await page_messages(page)).filter((m) => m.kind === 'error');
    if (c.panel !== 'plan') problem(`${p.what}: the page shows ${c.panel}, not the plan`);
    if (c.plan_layouts !== want) problem(`${p.what}: the Plan panel holds ${c.plan_layouts} layouts, the JSON ${want}`);
    for (const m of errors) problem(`${p.what}: the page says: ${m.text}`);
    for (const e of page.errors) problem(`${p.what}: ${e}`);
    if (c.panel === 'plan' && c.plan_layouts === want && !errors.length && !page.errors.length)
      note(`${p.what}: the Plan panel holds its ${want} layouts (${c.plan_measured} measured)`);
    await page.close();
  }
}

// A key pressed on the page as a presenter would, and held: down for 400 ms
// (past ImGui's repeat delay of 275 ms) and until a frame has begun and ended
// since (the page counts a frame at its end), then released; the page's
// counts a frame after. A press is one step however long it is held
// (viz/controls.hpp), so the hold shows a repeat if one came back.
async function press(page, key) {
  await page.keyboard.down(key);
  const frames = (await counts(page)).frames;
  await Promise.all([
    page.waitForFunction((n) => window.distlab.counts().frames > n, { timeout: 10000 }, frames),
    new Promise((done) => setTimeout(done, 400)),
  ]);
  await page.keyboard.up(key);
  const after = (await counts(page)).frames;
  await page.waitForFunction((n) => window.distlab.counts().frames > n + 1, { timeout: 10000 }, after);
  return counts(page);
}

// The ring all-reduce's steps each send a p-th of the tensor, so they take
// the same time: its step boundaries are the multiples of one step's time.
async function check_keys(browser, base) {
  const page = await open_page(browser, base, '?panel=collectives&collective=all_reduce&algorithm=ring&ranks=4');
  await still_drawing(page);
  let c = await counts(page);
  if (c.playing) c = await press(page, 'Space');
  const start = c.cursor_s;
  const first = (await press(page, 'ArrowRight')).cursor_s;
  const second = (await press(page, 'ArrowRight')).cursor_s;
  const back = (await press(page, 'ArrowLeft')).cursor_s;
  const step = second - first, k = first / step;
  const close = (a, b) => Math.abs(a - b) <= 1e-6 * Math.max(Math.abs(a), Math.abs(b));
  if (c.playing || !(first > start) || !(step > 0) || !close(k, Math.round(k)) || !close(back, first) ||
      !(Math.round(k) * step > start - 1e-6 * step) || !((Math.round(k) - 1) * step <= start + 1e-6 * step))
    problem(`keys: from ${start} s (playing ${c.playing}), right, right, left gave ${first}, ${second}, ${back} s, ` +
            'not the next step boundary, the one after it and the first again');
  else note(`keys: from ${start} s, right, right, left: ${first}, ${second}, ${back} s (steps of ${step} s)`);
  const playing = await press(page, 'Space');
  await page.waitForFunction((t) => window.distlab.counts().cursor_s > t, { timeout: 10000 }, playing.cursor_s);
  const paused = await press(page, 'Space');
  if (!playing.playing || paused.playing) problem(`keys: space gave playing ${playing.playing}, then ${paused.playing}`);
  else note('keys: space plays (the cursor moves on), space again pauses');
  for (const e of page.errors) problem(`keys: ${e}`);
  await page.close();
}

async function check_load(browser, base) {
  const page = await open_page(browser, base, '');
  const first = await page.evaluate(() => window.distlab.first_frame_ms);
  for (const e of page.errors) problem(`load: ${e}`);
  if (!(first > 0)) problem('load: no first frame');
  else note(`load: first frame drawn ${first.toFixed(0)} ms after navigation began`);
  await page.close();
}

// Drops `files` ({name, url}) on the page as a user would: a drop event
// whose DataTransfer holds File objects.
async function drop(page, files) {
  await page.evaluate(async (list) => {
    const transfer = new DataTransfer();
    for (const f of list) transfer.items.add(new File([await (await fetch(f.url)).blob()], f.name));
    document.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
  }, files);
}

async function check_traces(browser, base, dir) {
  const file = path.join(dir, 'check', 'l5.json');
  fs.copyFileSync(lesson_trace('l5.json'), file);
  const want = json_counts(file);
  const by_url = await open_page(browser, base, '?trace=check/l5.json');
  same_counts('by URL', page_row_counts(await counts(by_url)), want);
  // The page zoomed (its pixel ratio 1 -> 2): the panels draw at the new
  // size with the trace they hold, whose file was read once and is gone.
  await rescaled(by_url, 2);
  same_counts('by URL, the page zoomed', page_row_counts(await counts(by_url)), want);
  for (const e of by_url.errors) problem(`by URL, the page zoomed: ${e}`);
  await by_url.close();
  const dropped = await open_page(browser, base, '?panel=collectives');
  await drop(dropped, [{ name: 'l5.json', url: 'check/l5.json' }]);
  await dropped.waitForFunction(() => window.distlab.counts().events > 0, { timeout: 10000 }).catch(() => {});
  const c = await counts(dropped);
  if (c.panel !== 'trace') problem(`dropped: the page shows ${c.panel}, not the trace`);
  same_counts('dropped', page_row_counts(c), want);
  for (const e of dropped.errors) problem(`dropped: ${e}`);
  await dropped.close();

  // The Pipeline panel reads its trace's file again (App::reads_trace_files):
  // the page, which read the trace as it downloaded, still writes the file.
  const pipe = path.join(dir, 'check', 'pipe.json');
  run(path.join(build_dir, 'tests', 'viz', 'viz_pipeline_trace_emitter'),
      ['--out', pipe, '--schedule', '1f1b', '--ranks', '2', '--microbatches', '4', '--steps', '1']);
  const pipe_page = await open_page(browser, base, '?panel=pipeline&trace=check/pipe.json');
  same_counts('pipeline by URL', page_row_counts(await counts(pipe_page)), json_counts(pipe));
  await rescaled(pipe_page, 2);
  same_counts('pipeline by URL, the page zoomed', page_row_counts(await counts(pipe_page)), json_counts(pipe));
  const pipe_said = await page_messages(pipe_page);
  if (pipe_said.some((m) => /no pipeline run|could not be opened/.test(m.text)))
    problem(`pipeline by URL: the panel did not read its trace: ${JSON.stringify(pipe_said)}`);
  else note('pipeline by URL: the Pipeline panel read the trace file the page wrote');
  for (const e of pipe_page.errors) problem(`pipeline by URL: ${e}`);
  await pipe_page.close();

  // A hang's flight-recorder files beside its trace, by URL and dropped
  // together: the trace as counted from the JSON, and every flight file read.
  const hang = path.join(dir, 'check', 'hang');
  run(path.join(build_dir, 'tests', 'viz', 'viz_flight_fault_emitter'),
      ['--dir', hang, '--fault', 'skip', '--culprit', '2', '--ranks', '4', '--timeout-ms', '500']);
  const flights = fs.readdirSync(hang).filter((f) => /^flight\.rank\d+(\.exit)?\.json$/.test(f)).sort();
  const hang_want = json_counts(path.join(hang, 'trace.json'));
  const by_url_flight = await open_page(browser, base, `?trace=check/hang/trace.json&flight=${flights.map((f) => `check/hang/${f}`).join(',')}`);
  const dropped_flight = await open_page(browser, base, '?panel=collectives');
  await drop(dropped_flight, ['trace.json', ...flights].map((f) => ({ name: f, url: `check/hang/${f}` })));
  await dropped_flight.waitForFunction(() => window.distlab.counts().events > 0, { timeout: 10000 }).catch(() => {});
  await rescaled(by_url_flight, 2);
  for (const [what, page] of [['flight by URL, the page zoomed', by_url_flight], ['flight dropped', dropped_flight]]) {
    const c = await counts(page);
    same_counts(`${what}: the trace`, page_row_counts(c), hang_want);
    if (c.flight_files !== flights.length) problem(`${what}: ${c.flight_files} flight files read of ${flights.length}`);
    else note(`${what}: all ${flights.length} flight files read`);
    for (const e of page.errors) problem(`${what}: ${e}`);
    await page.close();
  }
}

async function expect_message(page, what, pattern) {
  try {
    await page.waitForFunction((p) => window.distlab.messages.some((m) => new RegExp(p).test(m.text)), { timeout: 10000 },
                               pattern.source);
    await still_drawing(page);
    const m = (await page_messages(page)).find((x) => pattern.test(x.text));
    note(`${what}: the page says "${m.text}" and goes on drawing`);
  } catch (e) {
    problem(`${what}: no message matching ${pattern} (messages: ${JSON.stringify(await page_messages(page))}): ${e.message}`);
  }
}

async function check_bad(browser, base, dir) {
  const good = fs.readFileSync(lesson_trace('l5.json'));
  fs.writeFileSync(path.join(dir, 'check', 'cut.json'), good.subarray(0, Math.floor(good.length / 2)));
  fs.writeFileSync(path.join(dir, 'check', 'notjson.json'), 'this is not JSON\n');
  let page = await open_page(browser, base, '?trace=check/cut.json');
  await expect_message(page, 'truncated by URL', /cut short or damaged/);
  await page.close();
  page = await open_page(browser, base, '?trace=check/notjson.json');
  await expect_message(page, 'not JSON by URL', /JSON|trace/);
  await page.close();
  page = await open_page(browser, base, '?panel=collectives');
  await drop(page, [{ name: 'notjson.json', url: 'check/notjson.json' }]);
  await expect_message(page, 'not JSON dropped', /notjson/);
  await page.close();
  page = await open_page(browser, base, '?panel=nonsense');
  await expect_message(page, 'unknown panel', /nonsense/);
  await page.close();
  page = await open_page(browser, base, '?trace=check/absent.json');
  await expect_message(page, 'absent trace', /404|cannot fetch/);
  await page.close();
  // Plan records it cannot read: the Plan panel without them.
  const record = plan_record();
  fs.writeFileSync(path.join(dir, 'check', 'plan_v9.json'), JSON.stringify({ ...record, version: 9 }));
  const whole = JSON.stringify(record, null, 1);
  fs.writeFileSync(path.join(dir, 'check', 'plan_cut.json'), whole.slice(0, Math.floor(whole.length / 2)));
  page = await open_page(browser, base, '?panel=plan&plan=check/plan_v9.json');
  await expect_message(page, 'plan of another version by URL', /version 9 of the plan record/);
  await page.close();
  page = await open_page(browser, base, '?panel=collectives');
  await drop(page, [{ name: 'plan_cut.json', url: 'check/plan_cut.json' }]);
  await expect_message(page, 'plan cut short dropped', /plan_cut\.json: cut short/);
  await page.close();
  page = await open_page(browser, base, '?panel=plan&plan=check/absent_plan.json');
  await expect_message(page, 'absent plan', /cannot fetch the plan .*404/);
  await page.close();
}

// A WebSocket client that asks for the live stream and never reads it: a
// browser too slow to take anything.
async function stalled_client(port) {
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.on('connect', resolve));
  socket.write('GET /live HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
               'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
  socket.pause();
  return socket;
}

// Lesson 05 run with --live into the server, its trace in `file`; its exit
// is listened for from the start (the run may end while the caller waits on
// a page). Resolves to the exit status and the output.
function live_run(live_port, file) {
  const lesson = spawn(path.join(build_dir, 'lessons', 'lesson_05_all_reduce'),
                       ['--backend', 'threads', '--ranks', '4', '--mb', '1', '--iters', '3', '--no-steps',
                        '--trace', file, '--live', `127.0.0.1:${live_port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  lesson.stdout.on('data', (d) => { output += d; });
  lesson.stderr.on('data', (d) => { output += d; });
  const kRunLimitMs = 120000;
  const limit = setTimeout(() => { problem(`live: the lesson did not end within ${kRunLimitMs} ms`); lesson.kill('SIGKILL'); },
                           kRunLimitMs);
  return new Promise((resolve) => lesson.on('close', (code) => { clearTimeout(limit); resolve({ code, output }); }));
}

const trace_events = (file) =>
  JSON.parse(fs.readFileSync(file, 'utf8')).traceEvents.filter((e) => e.ph === 'X' || e.ph === 'C').length;

async function check_live(browser, base, live_port, said) {
  const watchers = [await open_page(browser, base, '?panel=trace&live'), await open_page(browser, base, '?panel=trace&live')];
  const leaving = await open_page(browser, base, '?panel=trace&live');
  const stalled = await stalled_client(Number(new URL(base).port));
  const file = path.join(work, 'live.json');
  const ended = live_run(live_port, file);
  // The third page goes as soon as the first events reach it.
  await leaving.waitForFunction(() => window.distlab.counts().live > 0, { timeout: 30000 }).catch(() => {});
  const left_with = (await counts(leaving)).live;
  await leaving.close();
  const { code, output } = await ended;
  if (code !== 0) problem(`live: the lesson exited ${code} while pages watched: ${output}`);
  if (/drop/i.test(output)) problem(`live: the lesson dropped events: ${output}`);
  const events = trace_events(file);
  const want = json_counts(file);
  note(`live: a page closed after ${left_with} events; the run wrote ${events} events and exited ${code}`);
  for (const [i, page] of watchers.entries()) {
    await page.waitForFunction((n) => window.distlab.counts().live >= n, { timeout: 20000 }, events).catch(() => {});
    // Rows are rebuilt at most 5 times a second: a frame after 250 ms holds them all.
    await new Promise((r) => setTimeout(r, 300));
    await still_drawing(page);
    const c = await counts(page);
    if (c.live !== events) problem(`live: page ${i + 1} received ${c.live} events, the trace file holds ${events}`);
    same_counts(`live page ${i + 1}`, page_row_counts(c), want);
    for (const e of page.errors) problem(`live page ${i + 1}: ${e}`);
  }
  // A page that joins after the run is sent what happened.
  const late = await open_page(browser, base, '?panel=trace&live');
  await late.waitForFunction((n) => window.distlab.counts().live >= n, { timeout: 20000 }, events).catch(() => {});
  const late_count = (await counts(late)).live;
  if (late_count !== events) problem(`live: a late page received ${late_count} events, the trace file holds ${events}`);
  else note(`live: a page opened after the run received all ${events} events`);
  // A second run, after the server's gap between runs: the first page holds
  // both, a page opened after it only the second.
  await new Promise((r) => setTimeout(r, 1200));
  const second_file = path.join(work, 'live2.json');
  const second = await live_run(live_port, second_file);
  if (second.code !== 0) problem(`live: the second run exited ${second.code}: ${second.output}`);
  const second_events = trace_events(second_file);
  await watchers[0].waitForFunction((n) => window.distlab.counts().live >= n, { timeout: 20000 },
                                    events + second_events).catch(() => {});
  const across = (await counts(watchers[0])).live;
  if (across !== events + second_events)
    problem(`live: a page open across two runs received ${across} events, not ${events} + ${second_events}`);
  const after_second = await open_page(browser, base, '?panel=trace&live');
  await after_second.waitForFunction((n) => window.distlab.counts().live >= n, { timeout: 20000 }, second_events)
    .catch(() => {});
  await new Promise((r) => setTimeout(r, 300));  // anything more than the second run would have come by now
  const only_second = (await counts(after_second)).live;
  if (only_second !== second_events)
    problem(`live: a page opened after the second run received ${only_second} events, the second run wrote ${second_events}`);
  else note(`live: a second run of ${second_events} events: a page open across both holds ${across}, ` +
            `one opened after it only the second's`);
  const want_said = [/^distlab-viz-serve: run 1 began$/, /^distlab-viz-serve: run 1 ended: 1 rank stream\(s\), \d+ bytes relayed to \d+ page\(s\)$/,
                     /^distlab-viz-serve: run 2 began$/, /^distlab-viz-serve: run 2 ended: 1 rank stream\(s\), \d+ bytes relayed to \d+ page\(s\)$/];
  if (said.length !== want_said.length || !want_said.every((re, i) => re.test(said[i])))
    problem(`live: the server said ${JSON.stringify(said)}, not each run's beginning and end`);
  for (const line of said) note(line);
  for (const p of [...watchers, late, after_second]) await p.close();
  stalled.destroy();
}

// Lesson 05's deck (scripts/slides.sh built it into build/slides/) served
// beside the site, as serve.mjs serves them for a class.
async function check_deck(browser, base) {
  const slides = path.join(build_dir, 'slides');
  const manifest = JSON.parse(fs.readFileSync(path.join(slides, 'manifest.json'), 'utf8'));
  const live = manifest.artefacts.filter((a) => a.deck === '05_all_reduce' && a.kind === 'live');
  if (!live.length) return problem('deck: the manifest lists no live figure of 05_all_reduce');
  const deck = await browser.newPage();
  await deck.setViewport({ width: kWidth, height: kHeight });
  const errors = [];
  deck.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  await deck.goto(`${base}/slides/05_all_reduce.html`, { waitUntil: 'load' });
  // The slide that holds the figure, shown (a frame loads when it is on screen).
  const slide = await deck.evaluate(() => [...document.querySelectorAll('svg[data-marpit-svg]')]
    .findIndex((s) => s.querySelector('figure.live iframe')));
  if (slide < 0) return problem('deck: served, no slide of 05_all_reduce holds a live frame');
  await deck.evaluate((n) => { location.hash = `#${n}`; }, slide + 1);
  const handle = (await deck.$$('svg[data-marpit-svg]'))[slide];
  const frame_handle = await handle.$('figure.live iframe');
  const frame = await frame_handle.contentFrame();
  await frame.waitForFunction(() => document.body.dataset.drawn === '1', { timeout: 30000 });
  const want = new URL(live[0].page, `${base}/slides/`);
  const got = new URL(await frame.evaluate(() => location.href));
  if (got.pathname !== want.pathname || got.search !== want.search)
    problem(`deck: the frame shows ${got.pathname}${got.search}, the figure's view is ${want.pathname}${want.search}`);
  const panel = (await frame.evaluate(() => window.distlab.counts())).panel;
  const want_panel = want.searchParams.get('panel') || 'collectives';
  if (panel !== want_panel) problem(`deck: the page in the slide shows the ${panel} panel, the figure's is ${want_panel}`);
  const before = await frame.evaluate(() => window.distlab.counts().frames);
  await frame.waitForFunction((n) => window.distlab.counts().frames > n + 2, { timeout: 10000 }, before)
    .catch(() => problem('deck: the page in the slide draws no more frames'));
  const messages = await frame.evaluate(() => window.distlab.messages.filter((m) => m.kind === 'error').map((m) => m.text));
  for (const m of [...messages, ...errors]) problem(`deck: ${m}`);
  note(`deck: slide ${slide + 1} of 05_all_reduce runs ${got.pathname}${got.search} (the ${panel} panel)`);
  // Opened as a file (no server: the page could not load its WebAssembly), the still.
  await deck.goto(`file://${path.join(slides, '05_all_reduce.html')}`, { waitUntil: 'load' });
  const as_file = await deck.evaluate(() => ({ frames: document.querySelectorAll('figure.live iframe').length,
                                               stills: document.querySelectorAll('figure.live img').length }));
  if (as_file.frames !== 0 || as_file.stills !== live.length)
    problem(`deck: opened as a file, ${as_file.frames} frame(s) and ${as_file.stills} still(s), not 0 and ${live.length}`);
  else note(`deck: opened as a file, the ${as_file.stills} live figure(s) show their stills`);
  await deck.close();
}

async function main() {
  if (!fs.existsSync(path.join(site, 'distlab-viz.wasm'))) {
    console.log(`FAIL: no site in ${site} (scripts/web.sh builds it)`);
    process.exit(1);
  }
  const dir = served_folder();
  const said = [];  // the server's lines
  const { server, ranks } = await new Promise((resolve) => {
    const s = start({ site: dir, slides: path.join(build_dir, 'slides'), port: 0, bind: '127.0.0.1', live_port: 0,
                      live_bind: '127.0.0.1' },
                    (ready) => resolve({ ...s, ...ready }), (line) => said.push(line));
  });
  const base = `http://127.0.0.1:${server.address().port}`;
  const browser = await launch();
  // Under ctest's limit (300 s): a check that waits forever ends itself and
  // takes its browser with it, rather than being killed and leaving chromium
  // running through the tests after it.
  const watchdog = setTimeout(async () => {
    console.log(`FAIL: the ${check} check did not end within ${kCheckLimitMs / 1000} s; files in ${work}`);
    await browser.close().catch(() => {});
    process.exit(1);
  }, kCheckLimitMs);
  try {
    if (check === 'load') await check_load(browser, base);
    else if (check === 'panels') { await check_panels(browser, base, dir); await check_keys(browser, base); }
    else if (check === 'pixels') await check_pixels(browser, base, dir);
    else if (check === 'traces') await check_traces(browser, base, dir);
    else if (check === 'bad') await check_bad(browser, base, dir);
    else if (check === 'live') await check_live(browser, base, ranks.address().port, said);
    else if (check === 'deck') await check_deck(browser, base);
    else throw new Error(`unknown check '${check}' (load, panels, pixels, traces, bad, live, deck)`);
  } finally {
    clearTimeout(watchdog);
    await browser.close();
    server.close();
    ranks.close();
  }
  if (problems.length) {
    console.log(`${problems.length} problem(s); files in ${work}`);
    process.exit(1);
  }
  fs.rmSync(work, { recursive: true, force: true });
  console.log(`web ${check}: ok`);
  process.exit(0);
}

main().catch((e) => {
  console.log(`FAIL: ${e.stack || e}`);
  process.exit(1);
});
