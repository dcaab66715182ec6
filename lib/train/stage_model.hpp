// This rank's stage of the capstone's Transformer LM.
//
// The stage starts with the weights the whole model would have with the
// same seed (built whole, then copied by name: models/copy_state.hpp), so
// that every layout, 2 x 2 or one process, trains the same model and can be
// compared step for step. Thread ranks share one random generator, so the
// building is serialized. Above kWholeModelInitLimit parameters (the
// tutorial preset, ~1 B: 4 GB per rank for a moment) each stage is built
// directly from seed + stage instead: deterministic, but not equal to a
// one-process run's initial model.
#pragma once

#include <cstdint>

#include "models/transformer_lm.hpp"

namespace distlab::train {

inline constexpr int64_t kWholeModelInitLimit = 200'000'000;

// Stage `stage` of `stages` (an even split of the layers), on the CPU.
// Throws std::invalid_argument when there are fewer layers than stages.
models::TransformerLm build_stage(const models::TransformerLmOptions& options, int stage, int stages, uint64_t seed);

}  // namespace distlab::train
