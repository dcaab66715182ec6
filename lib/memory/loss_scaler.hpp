// The dynamic loss scaler fp16 training needs (PyTorch's GradScaler, Megatron's
// DynamicGradScaler): float16 holds numbers up to 65504 and flushes
// those below about 6e-8 to zero, and many gradients are that small. The
// loss is multiplied by a scale S before the backward, so every gradient
// comes out S times larger, inside float16's range; the gradients are
// divided by S before the optimizer sees them.
//
// The scale is found as the run goes: start high (2^16); a step whose
// gradients hold an inf or a NaN overflowed, so it is skipped (no update,
// the gradients thrown away) and S is multiplied by the backoff (0.5); after
// `growth_interval` clean steps in a row S is multiplied by the growth
// factor (2), to use the range again.
//
// The scale is a power of two (the defaults keep it one): multiplying and
// dividing by it changes no bit of a float32 or bfloat16 value that stays
// in range, so a run with the scaler and no overflow is the run without it,
// bit for bit (the capstone's test checks this).
//
// Every rank must make the same choice: the trainer decides from the whole
// model's gradient norm, which its clipping already sums over every rank
// (an inf or NaN anywhere makes it non-finite everywhere).
#pragma once

#include <string>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace distlab::memory {

struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16, GradScaler's and Megatron's
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // clean steps in a row before growing
};

class LossScaler {
 public:
  // Throws std::invalid_argument for a scale that is not positive, a
  // growth factor not above 1, a backoff not in (0, 1), an interval below 1.
  explicit LossScaler(LossScalerOptions options = {});

  double scale() const { return scale_; }
  int64_t growth_tracker() const { return clean_in_a_row_; }
  int64_t skipped_steps() const { return skipped_; }
  const LossScalerOptions& options() const { return options_; }

  // loss * scale.
  at::Tensor scale_loss(const at::Tensor& loss) const;
  // Each gradient divided by the scale, in place (undefined ones skipped).
  void unscale(const std::vector<at::Tensor>& gradients) const;
  // Whether any of the gradients holds an inf or a NaN.
  static bool any_not_finite(const std::vector<at::Tensor>& gradients);
  // After a step's gradients were checked on every rank: false (skip the
  // step) when they were not finite, the scale backed off; true otherwise,
  // the scale grown once the interval's clean steps are done.
  bool update(bool found_not_finite);

  // What a checkpoint keeps, and puts back on resume.
  void restore(double scale, int64_t growth_tracker);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t clean_in_a_row_ = 0;
  int64_t skipped_ = 0;
};

// A scale as the log says it: "2^16" for a power of two (the scaler's are),
// else the number.
std::string scale_text(double scale);

}  // namespace distlab::memory
