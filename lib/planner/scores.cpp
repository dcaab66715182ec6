#include "planner/scores.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace distlab::planner {

std::vector<double> ranks_of(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double mean = (double(i) + double(j)) / 2 + 1;  // positions i..j share their mean rank
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = mean;
    i = j + 1;
  }
  return ranks;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) throw std::invalid_argument("spearman: two lists of the same length >= 2");
  const std::vector<double> ra = ranks_of(a), rb = ranks_of(b);
  const double n = double(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;  // Pearson's on the ranks
}

Scores score(const std::vector<double>& predicted, const std::vector<double>& measured) {
  if (predicted.size() != measured.size() || predicted.size() < 2)
    throw std::invalid_argument("score: predicted and measured times of the same layouts, at least 2");
  Scores s;
  s.layouts = static_cast<int>(predicted.size());
  for (size_t i = 0; i < predicted.size(); ++i) {
    const double e = std::fabs(predicted[i] - measured[i]) / measured[i];
    s.mean_abs_error += e / double(predicted.size());
    s.worst_abs_error = std::max(s.worst_abs_error, e);
  }
  s.spearman = spearman(predicted, measured);
  const size_t chosen = static_cast<size_t>(std::min_element(predicted.begin(), predicted.end()) - predicted.begin());
  s.regret = measured[chosen] / *std::min_element(measured.begin(), measured.end()) - 1;
  return s;
}

}  // namespace distlab::planner
