#include "pipeline/checker.hpp"

#include <set>
#include <tuple>

#include "pipeline/replay.hpp"

namespace distlab::pipeline {

namespace {

using Key = std::tuple<ActionType, int, int>;  // type, stage, microbatch
Key key(ActionType t, int stage, int mb) { return {t, stage, mb}; }

CheckResult fail(int rank, int index, const Action& a, const std::string& why) {
  return {false,
          "rank " + std::to_string(rank) + ", action " + std::to_string(index) + " (" + to_string(a) + "): " + why,
          rank, index};
}

// Rules 1 and 2 for one action, given what this rank has already done.
std::string local_error(const Schedule& s, int rank, const Action& a, const std::set<Key>& done) {
  if (a.type == ActionType::kOverlapFB) {
    // Both halves are judged against what ran before the compound, not
    // against each other: overlapped, neither may wait for the other.
    for (const Action& part : parts(a)) {
      const std::string why = local_error(s, rank, part, done);
      if (!why.empty()) return "its half " + to_string(part) + ": " + why;
    }
    return {};
  }
  const int S = s.num_stages(), st = a.stage, i = a.microbatch;
  if (st < 0 || st >= S) return "stage " + std::to_string(st) + " does not exist (stages 0.." + std::to_string(S - 1) + ")";
  if (i < 0 || i >= s.microbatches)
    return "microbatch " + std::to_string(i) + " does not exist (0.." + std::to_string(s.microbatches - 1) + ")";
  if (s.rank_of_stage(st) != rank)
    return "stage " + std::to_string(st) + " lives on rank " + std::to_string(s.rank_of_stage(st));
  if (done.count(key(a.type, st, i))) return "runs a second time (each microbatch goes through each stage once)";
  auto has = [&](ActionType t, int stage) { return done.count(key(t, stage, i)) > 0; };
  const bool prev_local = st > 0 && s.rank_of_stage(st - 1) == rank;
  const bool next_local = st < S - 1 && s.rank_of_stage(st + 1) == rank;
  const std::string mb = std::to_string(i);
  switch (a.type) {
    case ActionType::kForward:
      if (st > 0 && prev_local && !has(ActionType::kForward, st - 1))
        return "its input, " + std::to_string(st - 1) + "F" + mb + " on this rank, has not run yet";
      if (st > 0 && !prev_local && !has(ActionType::kRecvF, st))
        return "its input was not received: no " + std::to_string(st) + "RECV_F" + mb + " before it";
      return {};
    case ActionType::kBackward:
    case ActionType::kBackwardInput: {
      if (!has(ActionType::kForward, st)) return "backward before its forward " + std::to_string(st) + "F" + mb;
      const ActionType other = a.type == ActionType::kBackward ? ActionType::kBackwardInput : ActionType::kBackward;
      if (has(other, st)) return "this microbatch already ran a backward of the other kind (B vs I+W) on this stage";
      if (st < S - 1 && next_local && !has(ActionType::kBackward, st + 1) && !has(ActionType::kBackwardInput, st + 1))
        return "its output gradient, from stage " + std::to_string(st + 1) + " on this rank, is not computed yet";
      if (st < S - 1 && !next_local && !has(ActionType::kRecvB, st))
        return "its output gradient was not received: no " + std::to_string(st) + "RECV_B" + mb + " before it";
      return {};
    }
    case ActionType::kBackwardWeight:
      if (!has(ActionType::kBackwardInput, st)) return "weight gradient before its input gradient " + std::to_string(st) + "I" + mb;
      return {};
    case ActionType::kSendF:
      if (st == S - 1) return "the last stage has nobody to send activations to";
      if (next_local) return "stage " + std::to_string(st + 1) + " is on this rank: hand over in memory, no message";
      if (!has(ActionType::kForward, st)) return "sends an activation before computing it (" + std::to_string(st) + "F" + mb + ")";
      return {};
    case ActionType::kSendB:
      if (st == 0) return "stage 0 has nobody to send gradients to";
      if (prev_local) return "stage " + std::to_string(st - 1) + " is on this rank: hand over in memory, no message";
      if (!has(ActionType::kBackward, st) && !has(ActionType::kBackwardInput, st))
        return "sends a gradient before computing it (" + std::to_string(st) + "B" + mb + " or I" + mb + ")";
      return {};
    case ActionType::kRecvF:
      if (st == 0) return "stage 0 reads the batch, it receives no activation";
      if (prev_local) return "stage " + std::to_string(st - 1) + " is on this rank: hand over in memory, no message";
      return {};
    case ActionType::kRecvB:
      if (st == S - 1) return "the last stage computes the loss, it receives no gradient";
      if (next_local) return "stage " + std::to_string(st + 1) + " is on this rank: hand over in memory, no message";
      return {};
    case ActionType::kOverlapFB: return {};  // handled above
  }
  return {};
}

}  // namespace

CheckResult check(const Schedule& s) {
  if (static_cast<int>(s.programs.size()) != s.ranks)
    return {false, "the schedule has " + std::to_string(s.programs.size()) + " programs for " + std::to_string(s.ranks) + " ranks"};
  // Rules 1 and 2, rank by rank.
  std::vector<std::set<Key>> done(s.ranks);
  for (int r = 0; r < s.ranks; ++r) {
    const auto& program = s.programs[r];
    for (size_t k = 0; k < program.size(); ++k) {
      const std::string why = local_error(s, r, program[k], done[r]);
      if (!why.empty()) return fail(r, static_cast<int>(k), program[k], why);
      for (const Action& part : parts(program[k])) done[r].insert(key(part.type, part.stage, part.microbatch));
    }
  }
  // Rule 3: every (stage, microbatch) forward and backward once.
  for (int st = 0; st < s.num_stages(); ++st) {
    const auto& d = done[s.rank_of_stage(st)];
    for (int i = 0; i < s.microbatches; ++i) {
      const std::string where = "rank " + std::to_string(s.rank_of_stage(st)) + ": ";
      const std::string mb = std::to_string(i);
      if (!d.count(key(ActionType::kForward, st, i)))
        return {false, where + "missing " + std::to_string(st) + "F" + mb + " (every microbatch goes through every stage)"};
      const bool full = d.count(key(ActionType::kBackward, st, i)) > 0;
      const bool split = d.count(key(ActionType::kBackwardInput, st, i)) > 0;
      if (!full && !split) return {false, where + "missing the backward of " + std::to_string(st) + "F" + mb};
      if (split && !d.count(key(ActionType::kBackwardWeight, st, i)))
        return {false, where + "missing " + std::to_string(st) + "W" + mb + " after " + std::to_string(st) + "I" + mb};
    }
  }
  // Rule 4: play it.
  const Replay played = replay(s, [](const Action&) { return 1.0; });
  if (!played.finished) {
    for (int r = 0; r < s.ranks; ++r) {
      const size_t k = played.times[r].size();
      if (k < s.programs[r].size()) return {false, "deadlock: " + played.deadlock, r, static_cast<int>(k)};
    }
  }
  std::multiset<std::string> sent, received;
  for (const auto& program : s.programs)
    for (const Action& a : program) {
      if (is_send(a.type)) sent.insert(message_of(a));
      if (is_recv(a.type)) received.insert(message_of(a));
    }
  for (int r = 0; r < s.ranks; ++r)
    for (size_t k = 0; k < s.programs[r].size(); ++k) {
      const Action& a = s.programs[r][k];
      if (is_send(a.type) && !received.count(message_of(a)))
        return fail(r, static_cast<int>(k), a, "message " + message_of(a) + " is never received");
    }
  return {};
}

void validate(const Schedule& schedule) {
  const CheckResult result = check(schedule);
  if (!result.ok) throw ScheduleError(schedule.describe() + ": " + result.error);
}

}  // namespace distlab::pipeline
