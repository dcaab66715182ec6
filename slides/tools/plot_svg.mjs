// A line plot as an SVG file, from numbers a DistLab program printed: one
// x column and one or more y columns, pulled out of the program's output by
// a regular expression (each match a row, capture group N a column).
// Drawn on the slides' light page, in the visualizer's category colours.

const kColors = ['#42a5f5', '#ef6c00', '#66bb6a', '#ab47bc', '#ffca28', '#26a69a'];
const kWidth = 1100, kHeight = 460;
const kMargin = { left: 110, right: 30, top: 24, bottom: 78 };

function escape(text) {
  return String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

// Rounded tick values covering [lo, hi]: 1, 2 or 5 times a power of ten.
function linear_ticks(lo, hi, count = 5) {
  if (hi === lo) return [lo];
  const raw = (hi - lo) / count, power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((f) => f * power).find((s) => s >= raw);
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(+t.toPrecision(12));
  return ticks;
}

function format_number(v) {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-2) return v.toExponential(0);
  return String(+v.toPrecision(3));
}

// rows: [[x, y1, y2, ...], ...]; options: xlabel, ylabel, legend (names of
// the y columns), logx, ymin0 (start the y axis at 0).
export function plot_svg(rows, options) {
  if (rows.length < 2) throw new Error(`a plot needs at least 2 rows of numbers, got ${rows.length}`);
  const series = rows[0].length - 1;
  const fx = options.logx ? Math.log2 : (v) => v;
  const xs = rows.map((r) => fx(r[0]));
  const ys = rows.flatMap((r) => r.slice(1));
  const x_lo = Math.min(...xs), x_hi = Math.max(...xs);
  let y_lo = options.ymin0 ? 0 : Math.min(...ys), y_hi = Math.max(...ys);
  if (y_hi === y_lo) y_hi = y_lo + 1;
  const pad = (y_hi - y_lo) * 0.08;
  y_hi += pad;
  if (!options.ymin0) y_lo -= pad;
  const plot_w = kWidth - kMargin.left - kMargin.right, plot_h = kHeight - kMargin.top - kMargin.bottom;
  const px = (x) => kMargin.left + (x_hi === x_lo ? plot_w / 2 : ((fx(x) - x_lo) / (x_hi - x_lo)) * plot_w);
  const py = (y) => kMargin.top + plot_h - ((y - y_lo) / (y_hi - y_lo)) * plot_h;

  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${kWidth}" height="${kHeight}" viewBox="0 0 ${kWidth} ${kHeight}" font-family="DejaVu Sans, sans-serif">`);
  out.push(`<rect width="${kWidth}" height="${kHeight}" fill="#ffffff"/>`);
  // Axes and grid.
  for (const t of linear_ticks(y_lo, y_hi)) {
    out.push(`<line x1="${kMargin.left}" x2="${kWidth - kMargin.right}" y1="${py(t)}" y2="${py(t)}" stroke="#e1e6ea"/>`);
    out.push(`<text x="${kMargin.left - 10}" y="${py(t) + 7}" font-size="20" text-anchor="end" fill="#39424b">${format_number(t)}</text>`);
  }
  const x_ticks = options.logx ? [...new Set(rows.map((r) => r[0]))] : linear_ticks(Math.min(...rows.map((r) => r[0])), Math.max(...rows.map((r) => r[0])));
  for (const t of x_ticks) {
    out.push(`<line x1="${px(t)}" x2="${px(t)}" y1="${kMargin.top + plot_h}" y2="${kMargin.top + plot_h + 8}" stroke="#39424b"/>`);
    out.push(`<text x="${px(t)}" y="${kMargin.top + plot_h + 32}" font-size="20" text-anchor="middle" fill="#39424b">${format_number(t)}</text>`);
  }
  out.push(`<line x1="${kMargin.left}" x2="${kWidth - kMargin.right}" y1="${kMargin.top + plot_h}" y2="${kMargin.top + plot_h}" stroke="#39424b" stroke-width="2"/>`);
  out.push(`<line x1="${kMargin.left}" x2="${kMargin.left}" y1="${kMargin.top}" y2="${kMargin.top + plot_h}" stroke="#39424b" stroke-width="2"/>`);
  out.push(`<text x="${kMargin.left + plot_w / 2}" y="${kHeight - 14}" font-size="22" text-anchor="middle" fill="#1d232a">${escape(options.xlabel ?? '')}</text>`);
  out.push(`<text transform="translate(26 ${kMargin.top + plot_h / 2}) rotate(-90)" font-size="22" text-anchor="middle" fill="#1d232a">${escape(options.ylabel ?? '')}</text>`);
  // One polyline with dots per y column.
  const legend = options.legend ?? [];
  for (let s = 0; s < series; ++s) {
    const color = kColors[s % kColors.length];
    const points = rows.map((r) => `${px(r[0]).toFixed(1)},${py(r[s + 1]).toFixed(1)}`).join(' ');
    out.push(`<polyline points="${points}" fill="none" stroke="${color}" stroke-width="4"/>`);
    for (const r of rows) out.push(`<circle cx="${px(r[0]).toFixed(1)}" cy="${py(r[s + 1]).toFixed(1)}" r="6" fill="${color}"/>`);
    if (legend[s]) {
      const ly = kMargin.top + 14 + s * 30;
      out.push(`<rect x="${kWidth - kMargin.right - 300}" y="${ly - 12}" width="26" height="8" fill="${color}"/>`);
      out.push(`<text x="${kWidth - kMargin.right - 264}" y="${ly - 2}" font-size="20" fill="#1d232a">${escape(legend[s])}</text>`);
    }
  }
  out.push('</svg>');
  return out.join('\n') + '\n';
}

// The rows a regular expression pulls out of a program's output.
export function rows_from_output(output, regex, x_group, y_groups) {
  const re = new RegExp(regex);
  const rows = [];
  for (const line of output.split('\n')) {
    const m = line.match(re);
    if (!m) continue;
    const row = [x_group, ...y_groups].map((g) => Number(m[g]));
    if (row.some((v) => !Number.isFinite(v)))
      throw new Error(`plot: a group of /${regex}/ is not a number in "${line}"`);
    rows.push(row);
  }
  return rows;
}
