// A `viz` artefact's command as the address of the same view in the
// browser build of the visualizer (viz/web/; viz/url_query.hpp turns the
// address back into these very flags):
//
//   build/viz/distlab-viz --collective all_reduce --algorithms ring --ranks 4 --step 1 --width 1600
//     -> ?collective=all_reduce&algorithms=ring&ranks=4
//
// Left out: what only makes a still (its size, the file, the instant or
// step it shows: the page animates from the start and its controls step).
// A file the figure opens (--trace F, --flight F, --plan F) is fetched from the
// site's traces/DECK/F, where scripts/web.sh copies the files the slides'
// runs wrote.
const kStillOnly = new Set(['--width', '--height', '--scale', '--screenshot', '--time', '--step']);
const kFetched = new Set(['--trace', '--flight', '--plan']);

export class PageQueryError extends Error {}

// A value as the address holds it: ',' and '/' stay as they are (legal in a
// query, and easier to read), anything else outside the unreserved set escaped.
const encode = (value) => encodeURIComponent(value).replace(/%2C/g, ',').replace(/%2F/g, '/');

// `words`: the command's words after the program. Returns "?k=v&..." ("" for none).
export function page_query(deck, words) {
  const pairs = [];
  for (let i = 0; i < words.length; ++i) {
    const word = words[i];
    if (!word.startsWith('--') || word.length < 3)
      throw new PageQueryError(`"${word}" is not a long option: a page address holds options only`);
    const has_value = i + 1 < words.length && !words[i + 1].startsWith('--');
    const value = has_value ? words[++i] : null;
    if (kStillOnly.has(word)) continue;
    const key = word.slice(2);
    if (kFetched.has(word)) {
      if (value === null) throw new PageQueryError(`${word} needs a file`);
      pairs.push(`${key}=${value.split(",").map((f) => encode(`traces/${deck}/${f}`)).join(",")}`);
    } else {
      pairs.push(value === null ? key : `${key}=${encode(value)}`);
    }
  }
  return pairs.length ? `?${pairs.join('&')}` : '';
}
