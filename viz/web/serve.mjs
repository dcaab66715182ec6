#!/usr/bin/env node
// distlab-viz-serve: the visualizer's site for a class, and a running
// lesson's live stream for every browser in the room. Node's standard
// library only.
//
//   node viz/web/serve.mjs [--site build/web/site] [--slides build/slides] [--port 8080]
//                          [--bind 0.0.0.0] [--live-port 29400] [--live-bind 127.0.0.1]
//
//   - HTTP: the static site scripts/web.sh built (GET and HEAD only, inside
//     the site folder only), on the local network unless --bind says otherwise;
//     and the class's decks (slides/: scripts/slides.sh) under /slides/, when
//     they are built, where a live figure is the page itself, running.
//   - the ranks: a lesson run with `--live HOST:LIVE_PORT` connects here as
//     it would to `distlab-viz --listen` (one TCP connection per rank process).
//   - the browsers: a page opened with `?live` asks ws://HOST:PORT/live; every
//     chunk a rank sends goes to every page, as one binary WebSocket message:
//     a 4-byte little-endian stream id (one per rank connection), then the
//     bytes (none: that rank's stream ended). The page reads each stream with
//     the library's own decoder (viz/web/relay_receiver.hpp).
//
// A relay rather than ranks that speak WebSocket: a rank keeps one TCP
// connection to one listener, exactly as with the native visualizer, and
// never learns how many pages watch; what a rank sends is kept once here, in
// order, so a page that joins late is sent everything from the start; and a
// page that reads slowly only falls behind in that log (at most kWindow
// bytes written to it and not yet taken), while the ranks' sockets are read
// as fast as they send. The log holds one run: a rank that connects when
// none is connected, kRunGapMs or more after the last one left, begins a
// new run, and a page that opens from then on is sent only it (a page
// already open keeps what it has and is sent the new run after it, as the
// native listener shows one run after another). The server prints a line
// as each run begins and ends. A rank that is not a DistLab sender is
// refused by the pages' decoder, not here.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const kWindow = 1 << 20;  // bytes written to a page and not yet taken before it waits for 'drain'
const kRunGapMs = 1000;   // no rank connected for this long: the next rank begins a new run
const kTypes = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.wasm': 'application/wasm',
                 '.data': 'application/octet-stream', '.json': 'application/json', '.css': 'text/css',
                 '.png': 'image/png', '.svg': 'image/svg+xml', '.pdf': 'application/pdf' };

function parse_args(argv) {
  const here = path.dirname(new URL(import.meta.url).pathname);
  const options = { site: path.join(here, '..', '..', 'build', 'web', 'site'),
                    slides: path.join(here, '..', '..', 'build', 'slides'), port: 8080, bind: '0.0.0.0',
                    live_port: 29400, live_bind: '127.0.0.1' };
  const names = { '--site': 'site', '--slides': 'slides', '--port': 'port', '--bind': 'bind', '--live-port': 'live_port',
                  '--live-bind': 'live_bind' };
  for (let i = 0; i < argv.length; i += 2) {
    if (argv[i] === '--help' || argv[i] === '-h') {
      console.log('usage: serve.mjs [--site DIR] [--slides DIR] [--port 8080] [--bind 0.0.0.0] [--live-port 29400] ' +
                  '[--live-bind 127.0.0.1]');
      process.exit(0);
    }
    const key = names[argv[i]];
    if (!key || i + 1 >= argv.length) throw new Error(`unknown option or missing value: ${argv[i]} (try --help)`);
    options[key] = argv[i + 1];
  }
  for (const key of ['port', 'live_port']) {
    options[key] = Number(options[key]);
    if (!Number.isInteger(options[key]) || options[key] < 0 || options[key] > 65535) throw new Error(`bad port: ${options[key]}`);
  }
  if (!fs.existsSync(path.join(options.site, 'index.html')))
    throw new Error(`no site in ${options.site} (build it: scripts/web.sh)`);
  return options;
}

// One server-to-client WebSocket message (binary, unmasked).
export function ws_frame(payload) {
  const n = payload.length;
  const head = n < 126 ? Buffer.from([0x82, n])
             : n < 65536 ? Buffer.from([0x82, 126, n >> 8, n & 255])
             : Buffer.concat([Buffer.from([0x82, 127]), (() => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; })()]);
  return Buffer.concat([head, payload]);
}

export function relay_chunk(stream, bytes) {
  const id = Buffer.alloc(4);
  id.writeUInt32LE(stream);
  return ws_frame(Buffer.concat([id, bytes]));
}

// The log every page is sent, from its start, at its own pace.
class Relay {
  constructor(say = () => {}) {
    this.log = [];     // this run's encoded WebSocket messages, in arrival order
    this.pages = new Set();
    this.streams = 0;
    this.connected = 0;
    this.left_at = -Infinity;  // when the last rank left
    this.runs = 0;
    this.say = say;
  }
  add(frame) {
    this.log.push(frame);
    for (const page of this.pages) this.pump(page);
  }
  // A page reads its own log: one open across runs finishes the old run's
  // (kept for it alone) before it moves to the new one.
  pump(page) {
    for (;;) {
      while (page.next < page.log.length && page.socket.writableLength < kWindow) page.socket.write(page.log[page.next++]);
      if (page.next < page.log.length || page.log === this.log) return;
      page.log = this.log;
      page.next = 0;
    }
  }
  begin_run() {
    this.log = [];
    this.runs += 1;
    this.run_streams = 0;
    this.run_bytes = 0;
    this.say(`distlab-viz-serve: run ${this.runs} began`);
  }
  join(socket) {
    const page = { socket, log: this.log, next: 0 };
    this.pages.add(page);
    socket.on('drain', () => this.pump(page));
    const leave = () => this.pages.delete(page);
    socket.on('close', leave);
    socket.on('error', leave);
    socket.on('data', (data) => {  // from the page: only a close (opcode 8) matters
      if (data.length > 0 && (data[0] & 0x0f) === 8) socket.end(Buffer.from([0x88, 0]));
    });
    this.pump(page);
  }
  rank(socket) {  // a rank's TCP connection
    if (this.connected === 0 && (this.runs === 0 || Date.now() - this.left_at >= kRunGapMs)) this.begin_run();
    this.connected += 1;
    this.run_streams += 1;
    const stream = this.streams++;
    let open = true;
    const gone = () => {
      if (!open) return;
      open = false;
      this.add(relay_chunk(stream, Buffer.alloc(0)));
      this.connected -= 1;
      this.left_at = Date.now();
      if (this.connected === 0)
        this.say(`distlab-viz-serve: run ${this.runs} ended: ${this.run_streams} rank stream(s), ` +
                 `${this.run_bytes} bytes relayed to ${this.pages.size} page(s)`);
    };
    socket.on('data', (bytes) => {
      this.run_bytes += bytes.length;
      this.add(relay_chunk(stream, bytes));
    });
    socket.on('end', gone);
    socket.on('close', gone);
    socket.on('error', () => socket.destroy());
  }
}

// A request's file: under /slides/ one of the decks' folder (when given),
// else one of the site's; never outside them.
function serve_file(options, request, response) {
  let root = path.resolve(options.site);
  let file;
  try {
    let wanted = decodeURIComponent(new URL(request.url, 'http://x').pathname);
    if (options.slides && (wanted === '/slides' || wanted.startsWith('/slides/'))) {
      root = path.resolve(options.slides);
      wanted = wanted.slice('/slides'.length) || '/';
    }
    file = path.resolve(root, '.' + wanted);
  } catch (e) {
    response.writeHead(400).end();
    return;
  }
  if (file !== root && !file.startsWith(root + path.sep)) {
    response.writeHead(403).end();
    return;
  }
  if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, 'index.html');
  fs.stat(file, (error, info) => {
    if (error || !info.isFile()) {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    response.writeHead(200, { 'content-type': kTypes[path.extname(file)] || 'application/octet-stream',
                              'content-length': info.size, 'cache-control': 'no-cache' });
    if (request.method === 'HEAD') response.end();
    else fs.createReadStream(file, { highWaterMark: 1 << 20 }).pipe(response);  // 1 MB reads: a 257 MB trace cost the server 0.6 of the CPU of 64 kB ones
  });
}

function upgrade(relay, request, socket) {
  const key = request.headers['sec-websocket-key'];
  if (new URL(request.url, 'http://x').pathname !== '/live' || !key) {
    socket.end('HTTP/1.1 404 Not Found\r\n\r\n');
    return;
  }
  const accept = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
               `Sec-WebSocket-Accept: ${accept}\r\n\r\n`);
  socket.setNoDelay(true);
  relay.join(socket);
}

function addresses(bind) {
  if (bind !== '0.0.0.0') return [bind];
  const found = [];
  for (const list of Object.values(os.networkInterfaces()))
    for (const a of list) if (a.family === 'IPv4') found.push(a.address);
  return found;
}

export function start(options, on_ready = () => {}, say = () => {}) {
  const relay = new Relay(say);
  const server = http.createServer((request, response) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405).end();
      return;
    }
    serve_file(options, request, response);
  });
  server.on('upgrade', (request, socket) => upgrade(relay, request, socket));
  const ranks = net.createServer((socket) => relay.rank(socket));
  let ready = 0;
  const both = () => {
    if (++ready < 2) return;
    on_ready({ port: server.address().port, live_port: ranks.address().port, relay });
  };
  server.listen(options.port, options.bind, both);
  ranks.listen(options.live_port, options.live_bind, both);
  return { server, ranks, relay };
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  let options;
  try {
    options = parse_args(process.argv.slice(2));
  } catch (e) {
    console.error(`distlab-viz-serve: ${e.message}`);
    process.exit(2);
  }
  start(options, ({ port, live_port }) => {
    for (const host of addresses(options.bind)) console.log(`distlab-viz-serve: the visualizer at http://${host}:${port}/`);
    if (fs.existsSync(path.join(options.slides, 'index.html')))
      console.log(`distlab-viz-serve: the decks at /slides/, their live figures running in the slides`);
    console.log(`distlab-viz-serve: ranks send with --live ${options.live_bind}:${live_port}; ` +
                `pages follow them at /?panel=trace&live`);
  }, (line) => console.log(line));
}
