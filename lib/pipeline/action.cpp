#include "pipeline/action.hpp"

#include <cctype>
#include <sstream>

namespace distlab::pipeline {

namespace {

// Longest names first, so that "SEND_F" is not read as "S" + "END_F".
const ActionType kAllTypes[] = {ActionType::kSendF,    ActionType::kRecvF,         ActionType::kSendB,
                                ActionType::kRecvB,    ActionType::kForward,       ActionType::kBackward,
                                ActionType::kBackwardInput, ActionType::kBackwardWeight};

// A stage or microbatch number: digits, at most 9 of them (an int).
int number_in(const std::string& word, const std::string& digits) {
  if (digits.size() > 9)
    throw ScheduleError("cannot read action '" + word + "': the number " + digits + " is too large");
  return std::stoi(digits);
}

Action parse_simple(const std::string& word) {
  size_t i = 0;
  while (i < word.size() && std::isdigit(static_cast<unsigned char>(word[i]))) ++i;
  size_t j = word.size();
  while (j > i && std::isdigit(static_cast<unsigned char>(word[j - 1]))) --j;
  const std::string middle = word.substr(i, j - i);
  if (i == 0 || j == word.size() || middle.empty())
    throw ScheduleError("cannot read action '" + word + "': expected <stage><type><microbatch>, e.g. 2F0 or 1SEND_B3");
  for (ActionType type : kAllTypes)
    if (middle == type_name(type)) return {type, number_in(word, word.substr(0, i)), number_in(word, word.substr(j))};
  throw ScheduleError("cannot read action '" + word + "': unknown type '" + middle +
                      "' (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, or (xFi;yBj)OVERLAP_F_B)");
}

// "(0F3;1B1)OVERLAP_F_B" or a simple action.
Action parse_one(const std::string& word) {
  if (word.empty() || word[0] != '(') return parse_simple(word);
  const size_t semi = word.find(';'), close = word.find(')');
  const std::string suffix = close == std::string::npos ? "" : word.substr(close + 1);
  if (semi == std::string::npos || close == std::string::npos || semi > close || suffix != "OVERLAP_F_B")
    throw ScheduleError("cannot read action '" + word + "': expected a compound (<stage>F<mb>;<stage>B<mb>)OVERLAP_F_B");
  const Action f = parse_simple(word.substr(1, semi - 1)), b = parse_simple(word.substr(semi + 1, close - semi - 1));
  if (f.type != ActionType::kForward || b.type != ActionType::kBackward)
    throw ScheduleError("cannot read action '" + word + "': OVERLAP_F_B joins one F and one B, in that order");
  return overlap_fb(f, b);
}

}  // namespace

const char* type_name(ActionType type) {
  switch (type) {
    case ActionType::kForward: return "F";
    case ActionType::kBackward: return "B";
    case ActionType::kBackwardInput: return "I";
    case ActionType::kBackwardWeight: return "W";
    case ActionType::kSendF: return "SEND_F";
    case ActionType::kRecvF: return "RECV_F";
    case ActionType::kSendB: return "SEND_B";
    case ActionType::kRecvB: return "RECV_B";
    case ActionType::kOverlapFB: return "OVERLAP_F_B";
  }
  return "?";
}

std::string to_string(const Action& action) {
  if (action.type == ActionType::kOverlapFB) {
    const std::vector<Action> fb = parts(action);
    return "(" + to_string(fb[0]) + ";" + to_string(fb[1]) + ")" + type_name(action.type);
  }
  return std::to_string(action.stage) + type_name(action.type) + std::to_string(action.microbatch);
}

Action overlap_fb(const Action& f, const Action& b) {
  Action a{ActionType::kOverlapFB, f.stage, f.microbatch};
  a.backward_stage = b.stage;
  a.backward_microbatch = b.microbatch;
  return a;
}

std::vector<Action> parts(const Action& action) {
  if (action.type != ActionType::kOverlapFB) return {action};
  return {{ActionType::kForward, action.stage, action.microbatch},
          {ActionType::kBackward, action.backward_stage, action.backward_microbatch}};
}

std::vector<Action> parse_actions(const std::string& text) {
  std::istringstream in(text);
  std::vector<Action> actions;
  for (std::string word; in >> word;) actions.push_back(parse_one(word));
  return actions;
}

std::string to_string(const std::vector<Action>& actions) {
  std::string out;
  for (const Action& a : actions) out += (out.empty() ? "" : " ") + to_string(a);
  return out;
}

}  // namespace distlab::pipeline
