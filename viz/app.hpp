// The whole visualizer in one frame: a full-window tab bar with one tab per
// panel. The window loop (window.cpp) and the headless renderer both call
// App::frame(); nothing here knows which of them is showing it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives_panel.hpp"
#include "context_panel.hpp"
#include "ddp_panel.hpp"
#include "experts_panel.hpp"
#include "memory_panel.hpp"
#include "options.hpp"
#include "pipeline_panel.hpp"
#include "plan_panel.hpp"
#include "trace_panel.hpp"
#include "wire_panel.hpp"

namespace distlab::viz {

// Style and font for the current ImGui context; `scale` > 1 for a projector.
// Call once after ImGui::CreateContext, before the first frame.
void setup_imgui(float scale);

class App {
 public:
  // Applies the options: loads trace files and the plan, starts the live
  // listener, sets up the collectives. Throws (trace::TraceFormatError,
  // PlanFormatError, std::runtime_error, std::invalid_argument) with a
  // message for the user. `downloaded`: the
  // trace files already read as they downloaded (viz/web), when they are
  // options.trace_files.
  explicit App(const Options& options, std::unique_ptr<OpenedTraces> downloaded = nullptr);

  void frame();
  // Every panel's drawing at `scale` from the next frame on, what they hold
  // kept (the page's pixel ratio changed: the view does not start over).
  void set_scale(float scale);

  // Whether `panel` reads the trace files again for what it shows (the
  // Pipeline, DDP, Experts and Wire panels), beside the Trace panel's model.
  static bool reads_trace_files(const std::string& panel);

  // Opens a plan record in the Plan panel (a file dropped on the page) and
  // shows that tab from the next frame; throws PlanFormatError, and the
  // panel keeps what it held.
  void open_plan(const std::string& path);

  TracePanel& trace_panel() { return trace_; }
  CollectivesPanel& collectives_panel() { return collectives_; }
  PipelinePanel& pipeline_panel() { return pipeline_; }
  DdpPanel& ddp_panel() { return ddp_; }
  MemoryPanel& memory_panel() { return memory_; }
  ContextPanel& context_panel() { return context_; }
  ExpertsPanel& experts_panel() { return experts_; }
  WirePanel& wire_panel() { return wire_; }
  PlanPanel& plan_panel() { return plan_; }
  // What the panels said while starting (files opened, a truncated trace,
  // the port listened on), worth printing on the terminal too.
  std::vector<std::string> messages() const;

 private:
  enum class Tab { kCollectives, kTrace, kPipeline, kDdp, kMemory, kContext, kExperts, kWire, kPlan };
  static Tab first_tab_of(const std::string& panel);
  void read_plan(const std::string& path);  // into the Plan panel, with a line in messages()
  // Gives the Wire panel the trace's rings, then --wire-ring and --wire-sample.
  void set_wire_trace(const std::vector<trace::Event>& events, const Options& options);
  Tab first_tab_;            // the tab selected by the next frame ...
  bool first_frame_ = true;  // ... when this is set: the first frame, or after open_plan
  CollectivesPanel collectives_;
  TracePanel trace_;
  PipelinePanel pipeline_;
  DdpPanel ddp_;
  MemoryPanel memory_;  // draws the trace panel's memory samples (files or live)
  ContextPanel context_;
  ExpertsPanel experts_;  // tokens per expert, from the trace files' experts counters
  WirePanel wire_;        // the same-host rings, from the trace files' "shm ring S->D" counters
  PlanPanel plan_;        // a record of distlab-plan --record
  std::vector<std::string> messages_;  // the pipeline and DDP panels' words about the trace
};

}  // namespace distlab::viz
