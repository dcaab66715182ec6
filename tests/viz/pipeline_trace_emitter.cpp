// A real pipeline run traced to a file, for the Pipeline panel's measured
// view: pipeline::PipelineExecutor on thread ranks (one process), each
// stage Linear(width, width) + Tanh, MSE loss, the library's Chrome-trace
// sink. The trace holds lanes "stage s" with the args pipeline::measure reads.
//
//   viz_pipeline_trace_emitter --out /tmp/p.json --schedule 1f1b --ranks 2 --microbatches 4 --steps 2
#include <CLI/CLI.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <cstdio>

#include "comm/threads_backend.hpp"
#include "pipeline/executor.hpp"
#include "trace/chrome_json.hpp"

int main(int argc, char** argv) {
  using namespace distlab;
  std::string out, schedule_name = "1f1b";
  int ranks = 2, microbatches = 4, chunks = 1, steps = 2, width = 64, batch = 64;
  CLI::App app{"a traced pipeline run on thread ranks"};
  app.add_option("--out", out, "trace file")->required();
  app.add_option("--schedule", schedule_name);
  app.add_option("--ranks", ranks)->check(CLI::Range(1, 8));
  app.add_option("--microbatches", microbatches)->check(CLI::Range(1, 64));
  app.add_option("--chunks", chunks)->check(CLI::Range(1, 4));
  app.add_option("--steps", steps)->check(CLI::Range(1, 100));
  app.add_option("--width", width)->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);

  const pipeline::ScheduleKind kind = pipeline::parse_kind(schedule_name);
  const pipeline::Schedule schedule = pipeline::make_schedule(kind, ranks, microbatches, chunks);
  auto recorder = std::make_shared<trace::Recorder>();
  recorder->add_sink(std::make_shared<trace::ChromeJsonSink>(out));
  comm::CommOptions options;
  options.recorder = recorder;
  comm::run_thread_ranks(ranks, [&](comm::Communicator& comm) {
    at::manual_seed(1);
    std::vector<pipeline::StageModule> stages;
    for (int c = 0; c < schedule.stages_per_rank; ++c) {
      torch::nn::Sequential seq(torch::nn::Linear(width, width), torch::nn::Tanh());
      stages.push_back(pipeline::stage_of(seq));
    }
    pipeline::ExecutorOptions eo;
    eo.loss = [](const at::Tensor& y, const at::Tensor& t) { return torch::nn::functional::mse_loss(y, t); };
    pipeline::PipelineExecutor pipe(comm, schedule, stages, eo);
    const at::Tensor x = at::randn({batch, width}), y = at::randn({batch, width});
    for (int k = 0; k < steps; ++k) pipe.step(x, y);
  }, options);
  recorder.reset();  // the sink closes the file
  std::printf("wrote %s: %s, %d steps\n", out.c_str(), schedule.describe().c_str(), steps);
  return 0;
}
