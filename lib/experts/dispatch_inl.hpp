// run_sorted (dispatch.hpp): a template, so that any expert set runs through it.
#pragma once

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace distlab::experts {

template <typename Run>
at::Tensor run_sorted(const at::Tensor& rows, const std::vector<int64_t>& counts, int64_t pad_to, Run run) {
  std::vector<at::Tensor> outs;
  int64_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t n = counts[i];
    at::Tensor x = rows.narrow(0, at, n);
    at += n;
    if (pad_to > 0) {
      if (n > pad_to)
        throw std::invalid_argument("experts: " + std::to_string(n) + " rows for expert " + std::to_string(i) +
                                    " exceed the capacity " + std::to_string(pad_to));
      x = at::cat({x, at::zeros({pad_to - n, rows.size(1)}, rows.options())});
    }
    if (x.size(0) == 0) continue;  // an expert nobody chose: nothing to run
    outs.push_back(run(static_cast<int64_t>(i), x).narrow(0, 0, n));
  }
  if (at != rows.size(0))
    throw std::invalid_argument("experts: counts add up to " + std::to_string(at) + " rows, there are " +
                                std::to_string(rows.size(0)));
  // No rows for any expert here: an empty result still in the graph, so that
  // the backward's exchanges run on this rank as on every other one.
  return outs.empty() ? rows.narrow(0, 0, 0) * 0 : at::cat(outs, 0);
}

}  // namespace distlab::experts
