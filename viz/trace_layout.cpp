#include "trace_layout.hpp"

#include <algorithm>

namespace distlab::viz {
namespace {

// The axis in microseconds of the trace's clock.
struct UsAxis {
  const TimeAxis& axis;
  double origin_us;

  float x_at(int64_t us) const { return axis.x_of((static_cast<double>(us) - origin_us) * 1e-6); }
  double us_at(float x) const { return origin_us + axis.time_at(x) * 1e6; }
  double begin_us() const { return origin_us + axis.begin_s * 1e6; }
  double end_us() const { return origin_us + axis.end_s * 1e6; }
};

// First index in [from, v.end()) with v[i] >= t, or > t when `after`.
size_t search(const std::vector<int64_t>& v, size_t from, double t, bool after) {
  auto it = after ? std::upper_bound(v.begin() + from, v.end(), t,
                                     [](double x, int64_t y) { return x < static_cast<double>(y); })
                  : std::lower_bound(v.begin() + from, v.end(), t,
                                     [](int64_t y, double x) { return static_cast<double>(y) < x; });
  return static_cast<size_t>(it - v.begin());
}

// From event j of a merged group (which has taken every event before j):
// the first event at or after j that could end the group, as far as one
// can tell without the group loop. Each event of [j, result) is shorter
// than `small_us` and starts less than `small_us` after the one before it
// ends (`small_us` is under min_px whatever the float rounding), so the
// group loop would take all of them; none ends past `end_us`. Looks at the
// events up to the end of j's block one by one, then at whole blocks.
size_t skip_merged(const Track& t, size_t j, double small_us, double end_us) {
  constexpr size_t B = Track::kBlock;
  const size_t n = t.begin_us.size();
  auto small = [small_us](int64_t us) { return static_cast<double>(us) < small_us; };
  size_t m = j;
  for (const size_t stop = std::min(n, (j / B + 1) * B); m < stop; ++m)
    if (!small(t.end_us[m] - t.begin_us[m]) || !small(t.begin_us[m] - t.end_us[m - 1]) ||
        static_cast<double>(t.end_us[m]) > end_us)
      return m;
  for (size_t b = m / B; b < t.block_max_us.size() && small(t.block_max_us[b]); ++b) {
    const size_t last = std::min(n, (b + 1) * B) - 1;
    if (static_cast<double>(t.end_us[last]) > end_us) break;
    m = last + 1;
  }
  return m;
}

}  // namespace

void layout_track(const Track& track, int64_t origin_us, const TimeAxis& axis, float min_px,
                  std::vector<BoxSpan>& out) {
  const UsAxis a{axis, static_cast<double>(origin_us)};
  const std::vector<int64_t>& begin = track.begin_us;
  const std::vector<int64_t>& end = track.end_us;
  const size_t n = begin.size();
  const double view_end = a.end_us();
  // With the track's block index: durations and gaps under this many us are
  // narrower than min_px on screen, with room for the rounding of x_at.
  const bool indexed = n > 0 && track.block_max_us.size() == (n + Track::kBlock - 1) / Track::kBlock;
  const double small_us = min_px * axis.seconds_per_pixel() * 1e6 * 0.999;
  // Events of a level do not overlap, so their ends are sorted too.
  size_t i = search(end, 0, a.begin_us(), /*after=*/false);
  while (i < n && static_cast<double>(begin[i]) <= view_end) {
    const float x0 = a.x_at(begin[i]);
    const float x1 = a.x_at(end[i]);
    if (x1 - x0 >= min_px) {
      out.push_back(BoxSpan{x0, x1, track.events[i], 1});
      ++i;
      continue;
    }
    // A narrow event: absorb every following event that starts within
    // min_px of the group's right edge. Of the events [j, k) found that way
    // only the last can reach past that point; if it is wide enough to be
    // drawn on its own it stays out of the group.
    // A group stops at the right edge: past it nothing is drawn.
    float group_x1 = x1;
    size_t j = i + 1;
    while (j < n && group_x1 <= axis.x1) {
      const size_t k = search(begin, j, a.us_at(group_x1 + min_px), /*after=*/true);
      if (k == j) break;
      if (a.x_at(end[k - 1]) - a.x_at(begin[k - 1]) >= min_px) {
        if (k - 1 > j) group_x1 = std::max(group_x1, a.x_at(end[k - 2]));
        j = k - 1;
        break;
      }
      group_x1 = std::max(group_x1, a.x_at(end[k - 1]));
      j = k;
      // Step over the events the group takes anyway, whole blocks at a time,
      // up to the right edge: zoomed out, a group runs across the view and
      // the search above would take it min_px at a time.
      if (indexed) {
        const size_t m = skip_merged(track, k, small_us, view_end);
        if (m > k) group_x1 = std::max(group_x1, a.x_at(end[m - 1]));
        j = m;
      }
    }
    out.push_back(BoxSpan{x0, std::max(group_x1, x0 + 1.0f), track.events[i], static_cast<uint32_t>(j - i)});
    i = j;
  }
}

void layout_flows(const TraceModel& model, const FlowBundle& bundle, const TimeAxis& axis, float spacing_px,
                  std::vector<FlowLink>& out) {
  const UsAxis a{axis, static_cast<double>(model.origin_us())};
  // Every send and recv of the bundle narrower than kMergePx (with room for
  // the rounding of x_at): none is visible, so no arrow is drawn.
  if (static_cast<double>(bundle.widest_end_us) < kMergePx * axis.seconds_per_pixel() * 1e6 * 0.999) return;
  auto visible = [&](uint32_t event) {
    const EventRecord& r = model.record(event);
    return a.x_at(r.end_us) - a.x_at(r.begin_us) >= kMergePx;
  };
  const size_t n = bundle.links.size();
  const double view_begin = a.begin_us();
  const double view_end = a.end_us();
  size_t i = search(bundle.right_max_us, 0, view_begin, /*after=*/false);
  // From link i, the first link leaving at least `px` pixels to its right.
  auto skip = [&](size_t from, float px) {
    return std::max(from + 1, search(bundle.left_us, from + 1, a.us_at(a.x_at(bundle.left_us[from]) + px), false));
  };
  while (i < n && static_cast<double>(bundle.left_us[i]) <= view_end) {
    const FlowLink& link = bundle.links[i];
    if (static_cast<double>(bundle.right_us[i]) < view_begin) {
      ++i;  // ends before the view: only near the left edge
    } else if (visible(link.send) || visible(link.recv)) {
      out.push_back(link);
      i = skip(i, spacing_px);  // the arrows leaving from the same few pixels
    } else {
      i = skip(i, spacing_px);  // inside merged runs, and so, most likely, are its neighbours
    }
  }
}

}  // namespace distlab::viz
