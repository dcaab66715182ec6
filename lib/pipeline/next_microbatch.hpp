// The one microbatch counter of the schedule builders that place actions by
// kind and stage ("the next forward of stage 3", "the next W of stage 0")
// rather than by microbatch: interleaved zero bubble, ZBV and DualPipeV.
//
// Each (stage, kind) counts on its own: forwards, input gradients (I) and
// weight gradients (W). A full backward B is an I and a W at once, so it
// counts as both.
#pragma once

#include <map>
#include <utility>

#include "pipeline/action.hpp"

namespace distlab::pipeline {

class NextMicrobatch {
 public:
  // `type` of `stage` for the next microbatch that has not had it, counted.
  Action take(ActionType type, int stage) {
    const int microbatch = peek(type, stage);
    if (type == ActionType::kBackward) {
      ++next_[{stage, ActionType::kBackwardInput}];
      ++next_[{stage, ActionType::kBackwardWeight}];
    } else {
      ++next_[{stage, type}];
    }
    return {type, stage, microbatch};
  }
  // That microbatch, not counted.
  int peek(ActionType type, int stage) const {
    const auto it = next_.find({stage, type == ActionType::kBackward ? ActionType::kBackwardInput : type});
    return it == next_.end() ? 0 : it->second;
  }

 private:
  std::map<std::pair<int, ActionType>, int> next_;
};

}  // namespace distlab::pipeline
