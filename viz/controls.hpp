// The few controls the panels show in their top bars (the cost-model ones:
// Collectives, Pipeline, DDP; the steppers: Collectives, Context parallel,
// Wire), written once.
#pragma once

#include <imgui.h>

#include <algorithm>
#include <exception>
#include <string>

#include "collectives/cost_model.hpp"

namespace distlab::viz {

// A number field `width_em` font sizes wide whose value stays in [lo, hi].
// True when the user changed it.
inline bool input_clamped(const char* label, double& value, double lo, double hi, float width_em) {
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * width_em);
  if (!ImGui::InputDouble(label, &value, 0.0, 0.0, "%.3g")) return false;
  value = std::clamp(value, lo, hi);
  return true;
}

// The alpha-beta link: latency (s) and seconds per byte, side by side.
inline bool link_inputs(collectives::LinkParams& link, float width_em) {
  bool changed = input_clamped("alpha s", link.alpha_s, 0.0, 1e6, width_em);
  ImGui::SameLine();
  changed |= input_clamped("beta s/B", link.beta_s_per_byte, 0.0, 1e6, width_em);
  return changed;
}

// A frame stalled for seconds (a busy machine, a page in the background)
// would make playback jump. Called between the backend's NewFrame and
// ImGui's, it lets a frame count as at most a tenth of a second.
inline void cap_frame_time() {
  ImGuiIO& io = ImGui::GetIO();
  io.DeltaTime = std::min(io.DeltaTime, 0.1f);
}

// For a presenter: the right arrow steps forward, the left one back, unless
// a text field has the keyboard. One press is one step however long the key
// is held: ImGui's repeat counts frame times, and on a busy machine a few
// slow frames would turn a press into two steps.
template <typename Back, typename Forward>
void step_with_arrow_keys(Back&& back, Forward&& forward) {
  if (ImGui::GetIO().WantTextInput) return;
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow), false)) forward();
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow), false)) back();
}

// Runs a panel's rebuild after a change; a bad setting becomes the message
// shown under the controls instead of an exception out of the frame.
template <typename Rebuild>
void rebuild_or_report(Rebuild&& rebuild, std::string& error) {
  try {
    rebuild();
    error.clear();
  } catch (const std::exception& e) {
    error = e.what();
  }
}

}  // namespace distlab::viz
