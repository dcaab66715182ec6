// How good a prediction was, once the layouts ran: the numbers `distlab-plan
// --measure` prints (and distlab-bench plan records).
//
//   error     (predicted - measured) / measured, per layout; the mean of
//             its absolute value and the worst
//   Spearman  the rank correlation of predicted and measured times (ties
//             share their mean rank): 1 when the prediction orders the
//             layouts as the machine does
//   regret    how much slower the layout predicted fastest ran than the
//             fastest one measured: measured[argmin predicted] / min
//             measured - 1
#pragma once

#include <vector>

namespace distlab::planner {

struct Scores {
  double mean_abs_error = 0, worst_abs_error = 0;
  double spearman = 0;
  double regret = 0;
  int layouts = 0;
};

std::vector<double> ranks_of(const std::vector<double>& values);  // 1-based, ties averaged
double spearman(const std::vector<double>& a, const std::vector<double>& b);
// predicted[i] and measured[i] of the same layout; needs at least 2.
Scores score(const std::vector<double>& predicted, const std::vector<double>& measured);

}  // namespace distlab::planner
