// The browser build's targets, measured in Debian's headless chromium
// (docs/benchmarks-web.md has the numbers). Each line prints the measure,
// its target and their ratio (below 1: within the target).
//
//   node viz/bench/web_bench.mjs --build-dir build [--events 1000000] [--clients 30] [--loads 5] [--pairs 3]
//                                [--parts load,open,live]
//
//   site      bytes of index.html, distlab-viz.{js,wasm,data} (no traces)
//   load      navigation to the first drawn frame, median of --loads page loads
//   open      a --events trace by ?trace=URL: navigation to the first frame
//             that holds it; the renderer's peak memory (VmHWM of chromium's
//             renderer processes); beside them, in turn, the native program
//             opening and drawing it (distlab-viz --screenshot, /usr/bin/time)
//   frame     the trace panel at that size: the page's own time to build and
//             submit a frame (median of 60), and the interval between frames
//             (the browser paces them to the display: 16.7 ms at 60 Hz)
//   live      an event a fake rank sends through the server to one page while
//             --clients - 1 other WebSocket clients of this script follow the
//             relay: sent -> received by the page, and sent -> in a drawn frame
//             (the Trace panel rebuilds its rows at most every 200 ms)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { start } from '../web/serve.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const build_dir = path.resolve(arg('--build-dir', 'build'));
const events = Number(arg('--events', 1000000));
const clients = Number(arg('--clients', 30));
const loads = Number(arg('--loads', 5));
const pairs = Number(arg('--pairs', 3));
const parts = arg('--parts', 'load,open,live').split(',');
const site = path.join(build_dir, 'web', 'site');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'distlab-web-bench-'));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const row = (what, value, unit, target) =>
  console.log(`${what.padEnd(44)} ${value.toFixed(1).padStart(9)} ${unit.padEnd(3)} target ${String(target).padStart(5)} ${unit.padEnd(3)} ratio ${(value / target).toFixed(2)}`);

function renderer_peak_mb() {
  let peak = 0;
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer')) continue;
      const hwm = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (hwm) peak = Math.max(peak, Number(hwm[1]) / 1024);
    } catch (e) { /* gone */ }
  }
  return peak;
}

// The smallest WebSocket client that follows the relay: the handshake, then
// the bytes received counted (frames are not taken apart).
function ws_client(port) {
  const client = { received: 0, socket: net.connect(port, '127.0.0.1') };
  client.socket.on('connect', () => client.socket.write(
    'GET /live HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n'));
  client.socket.on('data', (d) => { client.received += d.length; });
  return client;
}

async function main() {
  const dir = path.join(work, 'site');
  fs.mkdirSync(dir);
  for (const f of ['index.html', 'distlab-viz.js', 'distlab-viz.wasm', 'distlab-viz.data'])
    fs.symlinkSync(path.join(site, f), path.join(dir, f));
  const bytes = ['index.html', 'distlab-viz.js', 'distlab-viz.wasm', 'distlab-viz.data']
    .reduce((sum, f) => sum + fs.statSync(path.join(site, f)).size, 0);
  row('site without traces', bytes / 1e6, 'MB', 8);

  const big = path.join(dir, 'big.json');
  if (parts.includes('open')) spawnSync(path.join(build_dir, 'viz', 'distlab-viz-make-trace'), ['--out', big, '--events', String(events)], { stdio: 'inherit' });

  const { server, ranks } = await new Promise((resolve) => {
    const s = start({ site: dir, port: 0, bind: '127.0.0.1', live_port: 0, live_bind: '127.0.0.1' }, () => resolve(s));
  });
  const base = `http://127.0.0.1:${server.address().port}`;
  const { default: puppeteer } = await import(path.join(root, 'slides', 'node_modules', 'puppeteer-core', 'lib', 'esm',
                                                        'puppeteer', 'puppeteer-core.js'));
  const launch = () => puppeteer.launch({ executablePath: process.env.CHROME_PATH || '/usr/bin/chromium', headless: true,
                                          args: ['--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'] });
  let browser = await launch();
  const open = async (query) => {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 720 });
    await page.goto(`${base}/${query}`, { waitUntil: 'load' });
    await page.waitForFunction(() => document.body.dataset.drawn === '1', { timeout: 120000 });
    return page;
  };

  const firsts = [];
  for (let i = 0; i < (parts.includes('load') ? loads : 0); ++i) {
    const page = await open('');
    firsts.push(await page.evaluate(() => window.distlab.first_frame_ms));
    await page.close();
  }
  if (firsts.length) row(`load to first frame (median of ${loads})`, median(firsts), 'ms', 2000);

  // The trace opened natively and in a fresh browser (so the renderer's
  // peak is this trace's), in turn, --pairs times; medians and their ratio.
  await browser.close();
  const native_s = [];
  const native_mb = [];
  const page_s = [];
  const page_mb = [];
  let page = null;
  let held = 0;
  for (let i = 0; i < (parts.includes('open') ? pairs : 0); ++i) {
    const t = spawnSync('/usr/bin/time', ['-f', '%e %M', path.join(build_dir, 'viz', 'distlab-viz'), '--trace', big,
                                          '--screenshot', path.join(work, 'big.png')], { encoding: 'utf8' });
    const [wall, kb] = t.stderr.trim().split('\n').pop().split(' ').map(Number);
    native_s.push(wall);
    native_mb.push(kb / 1024);
    if (page) await browser.close();
    browser = await launch();
    page = await open('?trace=big.json');
    page_s.push((await page.evaluate(() => window.distlab.first_frame_ms)) / 1000);
    page_mb.push(renderer_peak_mb());
    held = (await page.evaluate(() => window.distlab.counts())).events;
  }
  if (page) {
    row(`open ${held} events: page, navigation to first frame`, median(page_s), 's', 5);
    console.log(`${'  native distlab-viz --screenshot, whole process'.padEnd(44)} ${median(native_s).toFixed(1).padStart(9)} s   page/native ${(median(page_s) / median(native_s)).toFixed(2)}`);
    row('  page: renderer peak memory', median(page_mb), 'MB', 1024);
    console.log(`${'  native: peak memory'.padEnd(44)} ${median(native_mb).toFixed(1).padStart(9)} MB  page/native ${(median(page_mb) / median(native_mb)).toFixed(2)}`);
    const frames = await page.evaluate(() => new Promise((resolve) => {
      const cpu = [];
      const at = [];
      const tick = () => {
        cpu.push(window.distlab.counts().frame_ms);
        at.push(performance.now());
        if (at.length < 60) requestAnimationFrame(tick);
        else resolve({ cpu, at });
      };
      requestAnimationFrame(tick);
    }));
    row('  trace panel frame: build + submit (median)', median(frames.cpu), 'ms', 16);
    const gaps = frames.at.slice(1).map((t, i) => t - frames.at[i]);
    row('  trace panel frame: interval (median)', median(gaps), 'ms', 16.7);
    await page.close();
  }
  if (!page) browser = await launch();

  // Live: one page and clients - 1 plain WebSocket clients on the relay.
  const watchers = [];
  for (let i = 0; i < clients - 1; ++i) watchers.push(ws_client(server.address().port));
  await new Promise((r) => setTimeout(r, 500));
  const live = await open('?panel=trace&live');
  await live.evaluate(() => {
    window.seen = [];  // [live count, Date.now() at receipt, Date.now() at the first frame holding it]
    let received = 0;
    let rows_events = 0;
    const tick = () => {
      const c = window.distlab.counts();
      const in_rows = c.rows.reduce((s, r) => s + r.events, 0);
      if (c.live > received) { received = c.live; window.seen.push({ n: received, received: Date.now() }); }
      if (in_rows > rows_events) {
        rows_events = in_rows;
        const s = window.seen.find((x) => x.n === in_rows);
        if (s) s.drawn = Date.now();
      }
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  const rank = net.connect(ranks.address().port, '127.0.0.1');
  await new Promise((r) => rank.on('connect', r));
  rank.setNoDelay(true);
  rank.write('{"distlab_live":1}\n');
  const sent = [];
  for (let i = 0; i < 20; ++i) {
    const us = 1000 * i;
    sent.push(Date.now());
    rank.write(`{"ph":"X","pid":0,"tid":0,"name":"step","cat":"compute","ts":${us},"dur":500,"args":{"lane":"compute"}}\n`);
    await new Promise((r) => setTimeout(r, 300));
  }
  const seen = await live.evaluate(() => window.seen);
  const received = [];
  const drawn = [];
  for (const s of seen) {
    if (s.n < 1 || s.n > sent.length) continue;
    received.push(s.received - sent[s.n - 1]);
    if (s.drawn) drawn.push(s.drawn - sent[s.n - 1]);
  }
  const bytes_each = watchers.map((w) => w.received);
  row(`live, ${clients} clients: sent -> page received (median)`, median(received), 'ms', 100);
  row(`live, ${clients} clients: sent -> page received (max)`, Math.max(...received), 'ms', 100);
  row(`live, ${clients} clients: sent -> drawn (median)`, median(drawn), 'ms', 100);
  row(`live, ${clients} clients: sent -> drawn (max)`, Math.max(...drawn), 'ms', 100);
  console.log(`(each of the ${clients - 1} other clients received ${Math.min(...bytes_each)}-${Math.max(...bytes_each)} bytes; ` +
              `the page ${received.length} of ${sent.length} events)`);
  rank.end();
  for (const w of watchers) w.socket.destroy();
  await browser.close();
  server.close();
  ranks.close();
  fs.rmSync(work, { recursive: true, force: true });
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
