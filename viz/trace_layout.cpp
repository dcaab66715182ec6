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

}  // namespace

void layout_track(const Track& track, int64_t origin_us, const TimeAxis& axis, float min_px,
                  std::vector<BoxSpan>& out) {
  const UsAxis a{axis, static_cast<double>(origin_us)};
  const std::vector<int64_t>& begin = track.begin_us;
  const std::vector<int64_t>& end = track.end_us;
  const size_t n = begin.size();
  const double view_end = a.end_us();
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
    }
    out.push_back(BoxSpan{x0, std::max(group_x1, x0 + 1.0f), track.events[i], static_cast<uint32_t>(j - i)});
    i = j;
  }
}

void layout_flows(const TraceModel& model, const FlowBundle& bundle, const TimeAxis& axis, float spacing_px,
                  std::vector<FlowLink>& out) {
  const UsAxis a{axis, static_cast<double>(model.origin_us())};
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
