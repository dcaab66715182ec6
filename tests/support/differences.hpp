// How far apart two results are, in a form a NaN cannot slip through.
//
// `std::max(worst, d)` starting from 0 drops a NaN (std::max(0.0, NaN) is 0)
// and `std::abs(a - b) > tol` is false for a NaN, so a test written that way
// passes when the code under test returns NaN. Here every non-finite value
// counts as the largest difference there is (+infinity), which fails every
// `<= tolerance`:
//
//   test_support::Worst worst;
//   for (...) worst.add(test_support::largest_difference(mine, reference));
//   EXPECT_LE(worst.value, 1e-5);          // +inf when anything was NaN
//
// and a lone comparison is written `within(d, tol)` (or `!(d <= tol)` for
// "too far"), never `d > tol`.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <initializer_list>
#include <limits>

namespace distlab::test_support {

inline constexpr double kInfinite = std::numeric_limits<double>::infinity();

// A difference as a fold keeps it: NaN and +-inf become +inf.
inline double as_difference(double d) { return std::isfinite(d) ? std::abs(d) : kInfinite; }

// True when d is a finite number no larger than tolerance (false for NaN).
inline bool within(double d, double tolerance) { return std::isfinite(d) && std::abs(d) <= tolerance; }

// True when d is a finite number larger than floor: "the weights really
// moved" must not pass because a NaN made the difference infinite.
inline bool exceeds(double d, double floor) { return std::isfinite(d) && d > floor; }

// The largest |a - b| over two tensors of one shape, computed in double;
// +inf when either is undefined (a gradient never computed), the shapes
// differ, or either holds a NaN or an infinity (two infinities of one sign
// are not "equal" results here: both are broken).
inline double largest_difference(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || a.sizes() != b.sizes()) return kInfinite;
  if (a.numel() == 0) return 0.0;
  const at::Tensor x = a.detach().to(at::kCPU, at::kDouble);
  const at::Tensor y = b.detach().to(at::kCPU, at::kDouble);
  if (!x.isfinite().all().item<bool>() || !y.isfinite().all().item<bool>()) return kInfinite;
  return as_difference((x - y).abs().max().item<double>());
}

// The same relative to the reference's largest magnitude (0 when both are 0).
inline double largest_relative_difference(const at::Tensor& mine, const at::Tensor& reference) {
  const double d = largest_difference(mine, reference);
  if (!std::isfinite(d)) return kInfinite;
  if (d == 0) return 0.0;  // also the empty tensor, which has no max
  const double scale = reference.detach().to(at::kDouble).abs().max().item<double>();
  return scale > 0 ? d / scale : d;
}

// The worst of many differences; once a NaN or infinity was added it stays +inf.
struct Worst {
  double value = 0.0;
  void add(double d) {
    const double e = as_difference(d);
    if (e > value) value = e;
  }
  void add(const at::Tensor& a, const at::Tensor& b) { add(largest_difference(a, b)); }
};

// max over a list, NaN-safe: `worst_of({d1, d2, d3})`.
inline double worst_of(std::initializer_list<double> ds) {
  Worst w;
  for (double d : ds) w.add(d);
  return w.value;
}

}  // namespace distlab::test_support
