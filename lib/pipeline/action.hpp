// One step of a pipeline schedule: compute or move one microbatch on one stage.
//
// Printed as torch.distributed.pipelining prints its _Action: stage, type,
// microbatch, so "2F0" is stage 2's forward of microbatch 0 and "1SEND_B3"
// is stage 1 sending microbatch 3's input gradient to stage 0.
//
//   F        forward
//   B        full backward: input gradient and weight gradient together
//   I        backward, input gradient only (zero-bubble schedules)
//   W        backward, weight gradient only (after the stage's I)
//   SEND_F   send this stage's output activation to stage + 1
//   RECV_F   receive this stage's input activation from stage - 1
//   SEND_B   send the gradient of this stage's input to stage - 1
//   RECV_B   receive the gradient of this stage's output from stage + 1
//
// No LibTorch here: schedules are plain data for tests and the visualizer.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace distlab::pipeline {

enum class ActionType { kForward, kBackward, kBackwardInput, kBackwardWeight, kSendF, kRecvF, kSendB, kRecvB };

struct Action {
  ActionType type = ActionType::kForward;
  int stage = 0;
  int microbatch = 0;

  bool operator==(const Action& other) const {
    return type == other.type && stage == other.stage && microbatch == other.microbatch;
  }
  bool operator!=(const Action& other) const { return !(*this == other); }
};

// A schedule, a file or a string could not be understood.
class ScheduleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "F", "B", "I", "W", "SEND_F", ...
const char* type_name(ActionType type);
// "2F0"
std::string to_string(const Action& action);
// "0F0 0SEND_F0 0RECV_B0 0B0" -> actions. Throws ScheduleError naming the bad word.
std::vector<Action> parse_actions(const std::string& text);
// Space-separated, the inverse of parse_actions.
std::string to_string(const std::vector<Action>& actions);

inline bool is_compute(ActionType t) {
  return t == ActionType::kForward || t == ActionType::kBackward || t == ActionType::kBackwardInput ||
         t == ActionType::kBackwardWeight;
}
inline bool is_send(ActionType t) { return t == ActionType::kSendF || t == ActionType::kSendB; }
inline bool is_recv(ActionType t) { return t == ActionType::kRecvF || t == ActionType::kRecvB; }
// B or I: the actions that produce the gradient of a stage's input.
inline bool is_input_backward(ActionType t) { return t == ActionType::kBackward || t == ActionType::kBackwardInput; }

}  // namespace distlab::pipeline
