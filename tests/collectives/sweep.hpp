// Helpers for the collectives tests: deterministic inputs any rank can
// recompute for any other rank, tolerances, and a thread-safe list of
// failures (ranks run as threads; failures are reported after they join).
#pragma once

#include <ATen/ATen.h>

#include <mutex>
#include <string>
#include <vector>

#include "comm/reduce_op.hpp"

namespace distlab::collectives::testing {

// What `rank` contributes in case `salt`: floats in [-1, 1], integers in
// [-10, 10], different on every rank and element.
inline at::Tensor input_for(int rank, int64_t count, at::ScalarType dtype, int salt) {
  if (dtype == at::kLong) return at::arange(count, at::kLong).mul(7).add(rank * 13 + salt).remainder(21).sub(10);
  return at::arange(count, at::kDouble).mul(0.37).add(1.3 * rank + 0.1 * salt).sin().to(dtype);
}

// Two summation orders of p values in [-1, 1] differ by at most
// 2 (p - 1) u p (u: unit roundoff); an average adds one rounding. Integers
// and max are exact.
inline double tolerance(at::ScalarType dtype, int p, comm::ReduceOp op) {
  if (op == comm::ReduceOp::kMax || op == comm::ReduceOp::kMin) return 0.0;
  double u = 0.0;
  switch (dtype) {
    case at::kFloat: u = 0x1p-24; break;
    case at::kDouble: u = 0x1p-53; break;
    case at::kBFloat16: u = 0x1p-8; break;
    case at::kHalf: u = 0x1p-11; break;
    default: u = 0.0;
  }
  return u * (2.0 * (p - 1) * p + 2.0);
}

class Failures {
 public:
  void add(const std::string& failure) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
    if (list_.size() < 10) list_.push_back(failure);
  }
  int count() const { return count_; }
  std::string report() const {
    std::string text = std::to_string(count_) + " failure(s); the first ones:";
    for (const auto& f : list_) text += "\n  " + f;
    return text;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> list_;
  int count_ = 0;
};

// Records a failure unless got and want have the same size and
// max |got - want| <= tol.
inline void expect_close(Failures& failures, const std::string& what, const at::Tensor& got, const at::Tensor& want,
                         double tol) {
  if (got.numel() != want.numel()) {
    failures.add(what + ": " + std::to_string(got.numel()) + " elements, expected " + std::to_string(want.numel()));
    return;
  }
  if (got.numel() == 0) return;
  const double diff = (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
  if (!(diff <= tol))
    failures.add(what + ": max abs diff " + std::to_string(diff) + " > tolerance " + std::to_string(tol));
}

}  // namespace distlab::collectives::testing
