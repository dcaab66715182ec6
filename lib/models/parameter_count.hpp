// Counting a model's parameters: by walking an allocated module (what the
// tutorial's get_total_params does) and analytically from the options, so
// that a 1-billion-parameter configuration can be sized without 4 GB of
// float32 being allocated.
#pragma once

#include <cstdint>
#include <string>

namespace torch::nn {
class Module;
}

namespace distlab::models {

struct GptOptions;
struct TransformerLmOptions;

// Sum of numel() over module.parameters(): buffers (the positional table) are
// not parameters and are not counted.
int64_t count_parameters(const torch::nn::Module& module);

// What GptImpl(options, first_layer, end_layer) would hold, without building it.
int64_t count_parameters(const GptOptions& options, int64_t first_layer = 0, int64_t end_layer = -1);

// What TransformerLmImpl(options, first_layer, end_layer) would hold.
int64_t count_parameters(const TransformerLmOptions& options, int64_t first_layer = 0, int64_t end_layer = -1);

// "Total parameters in model: 1,041,453,167", as the DDP + Pipe tutorial prints it
// ('{:,}'.format(total_params)).
std::string format_parameter_count(int64_t count);

}  // namespace distlab::models
