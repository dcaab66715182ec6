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
//   OVERLAP_F_B  one compound action (DualPipeV): the forward of one
//            microbatch on one stage and the full backward of another
//            microbatch on another stage of the same rank, run so that one
//            hides the other (torch's OVERLAP_F_B). Printed as torch prints
//            it: "(0F3;1B1)OVERLAP_F_B". The two halves must not depend on
//            each other: everything either needs is there before it starts.
//
// No LibTorch here: schedules are plain data for tests and the visualizer.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace distlab::pipeline {

enum class ActionType {
  kForward,
  kBackward,
  kBackwardInput,
  kBackwardWeight,
  kSendF,
  kRecvF,
  kSendB,
  kRecvB,
  kOverlapFB,
};

struct Action {
  ActionType type = ActionType::kForward;
  int stage = 0;       // OVERLAP_F_B: the forward's stage
  int microbatch = 0;  // OVERLAP_F_B: the forward's microbatch
  // OVERLAP_F_B only: the stage and microbatch of its full backward.
  int backward_stage = -1;
  int backward_microbatch = -1;

  bool operator==(const Action& other) const {
    return type == other.type && stage == other.stage && microbatch == other.microbatch &&
           backward_stage == other.backward_stage && backward_microbatch == other.backward_microbatch;
  }
  bool operator!=(const Action& other) const { return !(*this == other); }
};

// A schedule, a file or a string could not be understood.
class ScheduleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "F", "B", "I", "W", "SEND_F", ..., "OVERLAP_F_B"
const char* type_name(ActionType type);
// "2F0"; a compound: "(0F3;1B1)OVERLAP_F_B"
std::string to_string(const Action& action);
// "0F0 0SEND_F0 0RECV_B0 0B0 (1F2;2B0)OVERLAP_F_B" -> actions. Throws
// ScheduleError naming the bad word.
std::vector<Action> parse_actions(const std::string& text);
// Space-separated, the inverse of parse_actions.
std::string to_string(const std::vector<Action>& actions);

inline bool is_compute(ActionType t) {
  return t == ActionType::kForward || t == ActionType::kBackward || t == ActionType::kBackwardInput ||
         t == ActionType::kBackwardWeight || t == ActionType::kOverlapFB;
}
inline bool is_send(ActionType t) { return t == ActionType::kSendF || t == ActionType::kSendB; }
inline bool is_recv(ActionType t) { return t == ActionType::kRecvF || t == ActionType::kRecvB; }
// B or I: the actions that produce the gradient of a stage's input.
inline bool is_input_backward(ActionType t) { return t == ActionType::kBackward || t == ActionType::kBackwardInput; }

// The compound action of forward `f` (an F) and full backward `b` (a B).
Action overlap_fb(const Action& f, const Action& b);
// The simple actions an action stands for: itself, or a compound's F and B
// (in the order a CPU runs them).
std::vector<Action> parts(const Action& action);

}  // namespace distlab::pipeline
