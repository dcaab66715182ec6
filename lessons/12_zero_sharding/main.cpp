// Lesson 12: ZeRO, sharded data parallelism.
//
// DDP keeps everything on every rank: the parameters (4 bytes each in
// fp32), their gradients (4) and Adam's two moments (8): 16 bytes per
// parameter, times p ranks, for one model. ZeRO (Rajbhandari et al., 2020)
// keeps each of them on one rank only, 1/p each:
//   ZeRO-1  shards the optimizer state: reduce-scatter the gradients, each
//           rank steps its 1/p, all-gather the new parameters;
//   ZeRO-2  shards the gradients too: each bucket is reduce-scattered while
//           backward runs, and only my 1/p of it is kept;
//   ZeRO-3  shards the parameters too (PyTorch's FSDP): a layer's whole
//           parameters are all-gathered just before its forward and again
//           before its backward, and freed after.
// A reduce-scatter plus an all-gather is exactly DDP's ring all-reduce, so
// ZeRO-1 and ZeRO-2 send what DDP sends (2 Psi); ZeRO-3 gathers twice (3 Psi).
//
//   1. the paper's accounting for this model on p ranks
//   2. memory per rank, measured (every tensor's storage, counted once;
//      the allocator's peak for activations) beside the accounting
//   3. bytes each rank sent per step, read from the trace, beside 2 Psi / 3 Psi
//   4. step time
//   5. every stage ends with the parameters of one process on the whole batch
//   6. one ZeRO-3 step from the trace: all-gathers prefetched under the
//      previous layer's forward, reduce-scatters under backward
//
//   lesson_12_zero_sharding --backend threads --ranks 4
//   distlab-run --nproc-per-node 4 -- lesson_12_zero_sharding --backend gloo --trace zero.json
//   distlab-viz --panel memory --trace zero.json
#include <CLI/CLI.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "compare.hpp"
#include "lesson.hpp"
#include "replicas.hpp"
#include "timing.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "models/square_mlp.hpp"
#include "trace/clock.hpp"
#include "trace/recorder.hpp"
#include "memory/allocator_meter.hpp"
#include "zero/memory.hpp"
#include "zero/overlap.hpp"
#include "zero/zero1.hpp"
#include "zero/zero2.hpp"
#include "zero/zero3.hpp"

using namespace distlab;
using lessons::format_megabytes;
using lessons::format_seconds;
using zero::MemoryUse;
using zero::Stage;

namespace {

struct Options {
  comm::JobOptions job;
  int width = 2048;
  int layers = 6;
  int rows = 8;      // per rank per step
  int steps = 3;     // timed steps, after one untimed
  double lr = 1e-3;  // Adam's
  int threads = 0;   // intra-op threads per rank; 0 = cores / ranks on this machine
};

// `layers` x Linear(width, width) + Tanh: at the defaults 25.2 M parameters,
// 403 MB of fp32 model states per DDP rank.
torch::nn::Sequential make_model(const Options& o) {
  torch::nn::Sequential model = models::square_mlp(o.layers, o.width, models::Activation::kTanh);
  lessons::fill_from_seed(*model, 12);  // the same on every rank and for every stage
  return model;
}

torch::optim::AdamOptions adam_options(const Options& o) { return torch::optim::AdamOptions(o.lr); }

at::Tensor loss_of(const at::Tensor& out, const at::Tensor& y) { return torch::nn::functional::mse_loss(out, y); }

// The rows' order in the trace: a span around backward, so that the overlap
// of part 6 has the whole compute of the step.
void traced_backward(comm::Communicator& comm, const at::Tensor& loss, int64_t step) {
  trace::Span span(comm.recorder(), comm.world_rank(), trace::kLaneCompute, "backward", "backward");
  span.arg("step", step);
  loss.backward();
}

// What one stage's run gives the parts.
struct Run {
  std::string name;
  Stage stage = Stage::kDdp;
  MemoryUse measured;     // after the last step, the largest of any rank's, per category
  MemoryUse formula;      // the paper's, for the same rank
  int64_t sent_bytes = 0; // rank 0's, in the traced step (the first timed one)
  double seconds = 0;     // per step: the median of the timed steps, slowest rank
  double difference = 0;  // max |parameter - one process's| at the end
  int64_t traced_step = -1;  // the traced step's number in the stage's own spans
  std::vector<trace::Event> events;  // rank 0: the stage's trace
};

// The element-wise largest of every rank's use.
MemoryUse largest_over_ranks(comm::Communicator& comm, const MemoryUse& mine) {
  std::vector<double> values;
  for (const auto& [category, bytes] : mine.series()) values.push_back(static_cast<double>(bytes));
  at::Tensor t = at::tensor(values, at::kDouble).to(comm.device());
  comm.native_all_reduce(t, comm::ReduceOp::kMax);
  t = t.cpu();
  MemoryUse out;  // series() order: parameters, gradients, optimizer state, buffers, activations
  out.parameters = static_cast<int64_t>(t[0].item<double>());
  out.gradients = static_cast<int64_t>(t[1].item<double>());
  out.optimizer_state = static_cast<int64_t>(t[2].item<double>());
  out.buffers = static_cast<int64_t>(t[3].item<double>());
  out.activations = static_cast<int64_t>(t[4].item<double>());
  return out;
}

double max_difference(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& reference) {
  double worst = 0;
  for (size_t i = 0; i < params.size(); ++i)
    worst = std::max(worst, (params[i].detach().cpu() - reference[i]).abs().max().item<double>());
  return worst;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

class Lesson {
 public:
  Lesson(comm::Communicator& comm, const Options& o) : comm_(comm), o_(o), p_(comm.size()) {
    if (comm.backend() != "threads") meter_ = &memory::AllocatorMeter::install();
    memory_ = std::make_shared<trace::MemorySink>();
    if (comm.rank() == 0) comm.recorder_ptr()->add_sink(memory_);  // thread ranks share one recorder
    comm.barrier();
    const lessons::Data data = lessons::make_data(static_cast<int64_t>(o.rows) * p_, o.width, o.width, /*seed=*/7);
    whole_ = data;
    mine_ = data.rows(static_cast<int64_t>(comm.rank()) * o.rows, o.rows);
    for (const auto& t : make_model(o)->parameters()) psi_ += t.numel();
  }

  int64_t psi() const { return psi_; }

  // One process on the whole batch (rank 0; the others wait): the reference
  // every stage is held to. Also the activations: what forward allocates
  // and keeps for backward, measured on rank 0 while the others wait, the
  // same for every stage (ZeRO shards model states, not activations).
  void reference() {
    if (comm_.rank() == 0) {
      memory::AllocatorMeter& meter = memory::AllocatorMeter::install();
      auto model = make_model(o_);
      torch::optim::Adam adam(model->parameters(), adam_options(o_));
      for (int s = 0; s < o_.steps + 1; ++s) {
        compat::zero_grad(adam);
        loss_of(model->forward(whole_.x), whole_.y).backward();
        adam.step();
      }
      for (const auto& t : model->parameters()) reference_.push_back(t.detach().clone());
      auto local = make_model(o_);
      const int64_t before = meter.allocated();
      meter.reset_peak();
      at::Tensor loss = loss_of(local->forward(mine_.x), mine_.y);
      activations_ = meter.peak() - before;
    }
    comm_.barrier();
  }
  int64_t activations() const { return activations_; }

  // Runs `forward` and notes into `peaks` what it left for backward (this
  // process's allocator: bytes after less bytes before). Only with a
  // process per rank (gloo): thread ranks share one allocator, and note nothing.
  template <typename Forward>
  at::Tensor forward_noting(zero::StepPeaks& peaks, Forward&& forward) {
    // settle(): gloo's copies of what this rank sent are freed, not counted.
    if (meter_ != nullptr) comm_.settle();
    const int64_t before = meter_ != nullptr ? meter_->allocated() : 0;
    at::Tensor loss = forward();
    if (meter_ != nullptr) comm_.settle();
    if (meter_ != nullptr) peaks.note_activations(meter_->allocated() - before);
    return loss;
  }

  // Runs `stage`: one untimed step, then o.steps timed ones (the first of
  // them traced for its bytes); `step(s)` does forward, backward and the
  // optimizer's step number s. Then measures the memory and the parameters.
  template <typename StepFn, typename MemoryFn, typename ParamsFn>
  Run run(const std::string& name, Stage stage, StepFn&& step, MemoryFn&& memory, ParamsFn&& parameters) {
    Run r{name, stage};
    step(0);
    std::vector<double> times;
    int64_t from = 0, to = 0;  // the traced step
    for (int s = 1; s <= o_.steps; ++s)
      times.push_back(lessons::slowest_rank_seconds(comm_, [&] {
        if (s == 1) from = trace::now_us();
        step(s);
        if (s == 1) to = trace::now_us();
      }));
    r.seconds = median(times);
    r.traced_step = 1;
    const auto [measured, formula] = memory();
    r.measured = largest_over_ranks(comm_, measured);
    r.formula = formula;
    const std::vector<at::Tensor> params = parameters();  // every rank: ZeRO-3 gathers
    comm_.barrier();  // every rank's spans of the stage are in the sink
    if (comm_.rank() == 0) {
      r.difference = max_difference(params, reference_);
      r.events = memory_->events();
      memory_->clear();
      r.sent_bytes = trace::bytes_sent(r.events, comm_.world_rank(), from, to);
    }
    comm_.barrier();
    return r;
  }

  Run ddp() {
    auto model = make_model(o_);
    ddp::DdpOptions options;
    options.algorithm = collectives::Algorithm::kRing;  // the library's ring: its steps carry the bytes sent
    ddp::DistributedDataParallel ddp(comm_, model.ptr(), options);
    torch::optim::Adam adam(model->parameters(), adam_options(o_));
    zero::StepPeaks peaks;
    auto step = [&](int s) {
      compat::zero_grad(adam);
      at::Tensor loss = forward_noting(peaks, [&] {
        return ddp.forward([&] { return loss_of(model->forward(mine_.x), mine_.y); });
      });
      traced_backward(comm_, loss, s);
      adam.step();
    };
    auto memory = [&] {
      const std::vector<at::Tensor> params = model->parameters();
      MemoryUse m = zero::measure_memory(params, &adam);
      // The buckets the all-reduces run on, where they are not the .grads themselves.
      zero::StorageCounter counted;
      for (const auto& t : params) {
        counted.add(t);
        counted.add(t.grad());
      }
      for (const auto& b : ddp.reducer().bucket_buffers()) m.buffers += counted.add(b);
      m.activations = peaks.activations();
      const MemoryUse formula = zero::accounting(Stage::kDdp, psi_, p_, 4, 8);
      zero::record_memory(comm_.recorder(), comm_.world_rank(), "DDP", m, formula);
      return std::make_pair(m, formula);
    };
    return run("DDP", Stage::kDdp, step, memory, [&] { return model->parameters(); });
  }

  template <typename Zero>
  Run zero12(const std::string& name, Stage stage) {
    auto model = make_model(o_);
    Zero zero(comm_, *model, zero::adam(adam_options(o_)));
    auto step = [&](int) {
      zero.zero_grad();
      const at::Tensor loss =
          forward_noting(zero.sharded().peaks(), [&] { return loss_of(model->forward(mine_.x), mine_.y); });
      traced_backward(comm_, loss, zero.sharded().steps());
      zero.step();
    };
    auto memory = [&] { return std::make_pair(zero.sharded().memory(), zero.sharded().accounting()); };
    return run(name, stage, step, memory, [&] { return model->parameters(); });
  }

  Run zero3(bool prefetch) {
    zero::Zero3Options options;
    options.prefetch = prefetch;
    zero::Zero3 zero(comm_, make_model(o_), zero::adam(adam_options(o_)), options);
    int64_t traced = -1;
    auto step = [&](int s) {
      if (s == 1) traced = zero.sharded().steps();
      zero.zero_grad();
      const at::Tensor loss =
          forward_noting(zero.sharded().peaks(), [&] { return loss_of(zero.forward(mine_.x), mine_.y); });
      traced_backward(comm_, loss, zero.sharded().steps());
      zero.step();
    };
    auto memory = [&] { return std::make_pair(zero.sharded().memory(), zero.sharded().accounting()); };
    Run r = run(prefetch ? "ZeRO-3" : "ZeRO-3 no prefetch", Stage::kZero3, step, memory,
                [&] { return zero.full_parameters(); });
    r.traced_step = traced;
    return r;
  }

 private:
  comm::Communicator& comm_;
  const Options& o_;
  const int p_;
  std::shared_ptr<trace::MemorySink> memory_;
  lessons::Data whole_, mine_;
  int64_t psi_ = 0;
  int64_t activations_ = 0;
  memory::AllocatorMeter* meter_ = nullptr;  // gloo: this rank's process
  std::vector<at::Tensor> reference_;  // rank 0
};

std::string mb(int64_t bytes) { return format_megabytes(static_cast<double>(bytes)); }

// Megabytes, without the unit (the tables say MB once).
std::string mb_number(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", static_cast<double>(bytes) / 1e6);
  return text;
}

// Part 1.
void print_accounting(int64_t psi, int p) {
  std::printf("\n1. The accounting (ZeRO paper, section 3): fp32 Adam, Psi = %lld parameters, p = %d\n",
              static_cast<long long>(psi), p);
  std::printf("  %-8s %11s %11s %11s %13s   %s\n", "MB", "parameters", "gradients", "optimizer", "model states",
              "sent per rank per step");
  const char* traffic[] = {"2 Psi (p-1)/p", "2 Psi (p-1)/p", "2 Psi (p-1)/p", "3 Psi (p-1)/p"};
  for (Stage s : {Stage::kDdp, Stage::kZero1, Stage::kZero2, Stage::kZero3}) {
    const MemoryUse m = zero::accounting(s, psi, p, 4, 8);
    std::printf("  %-8s %11s %11s %11s %13s   %s\n", zero::to_string(s), mb_number(m.parameters).c_str(),
                mb_number(m.gradients).c_str(), mb_number(m.optimizer_state).c_str(),
                mb_number(m.model_states()).c_str(), traffic[static_cast<int>(s)]);
  }
  std::printf("  DDP     all-reduce the gradients (= reduce-scatter + all-gather)\n"
              "  ZeRO-1  reduce-scatter the gradients after backward, step my 1/p, all-gather parameters\n"
              "  ZeRO-2  the same, each bucket's reduce-scatter while backward runs\n"
              "  ZeRO-3  all-gather each layer before forward and again before backward, reduce-scatter\n");
}

// Part 6: one ZeRO-3 step of rank `rank` as bars on one time axis.
void print_zero3_step(const std::vector<trace::Event>& events, int rank, int64_t step) {
  std::vector<const trace::Event*> rows;
  const std::string wanted = std::to_string(step);
  for (const auto& e : events)
    if (e.rank == rank && !e.is_counter() && e.arg("step") == wanted &&
        (e.category == "zero_forward" || e.category == "backward" || e.category == "zero_wait" ||
         e.category == "zero_all_gather" || e.category == "zero_reduce_scatter"))
      rows.push_back(&e);
  if (rows.empty()) return;
  std::sort(rows.begin(), rows.end(), [](auto a, auto b) { return a->begin_us < b->begin_us; });
  int64_t t0 = rows.front()->begin_us, t1 = t0;
  for (const auto* e : rows) t1 = std::max(t1, e->end_us);
  constexpr int kWidth = 36;
  const double scale = static_cast<double>(kWidth) / static_cast<double>(std::max<int64_t>(1, t1 - t0));
  for (const auto* e : rows) {
    std::string line(kWidth, ' ');
    const int from = std::clamp(static_cast<int>(static_cast<double>(e->begin_us - t0) * scale), 0, kWidth - 1);
    const int to = std::clamp(static_cast<int>(static_cast<double>(e->end_us - t0) * scale), from + 1, kWidth);
    const char mark = e->category == "zero_wait"                                  ? '.'
                      : e->category == "zero_forward" || e->category == "backward" ? '='
                                                                                  : '#';
    for (int i = from; i < to; ++i) line[static_cast<size_t>(i)] = mark;
    std::printf("  %-28s |%s| %6.1f .. %6.1f ms\n", e->name.c_str(), line.c_str(),
                static_cast<double>(e->begin_us - t0) / 1000.0, static_cast<double>(e->end_us - t0) / 1000.0);
  }
}

void run(comm::Communicator& comm, const Options& o, lessons::Parts& parts) {
  const int p = comm.size(), me = comm.rank();
  if (p < 2) throw comm::SetupError("lesson 12 needs at least 2 ranks to shard over (--ranks 4)");
  const int threads = lessons::share_cores(o.threads);
  Lesson lesson(comm, o);
  const int64_t psi = lesson.psi();
  if (me == 0) {
    std::printf("Lesson 12: ZeRO  (%s backend, %s, %d intra-op thread(s) per rank)\n",
                comm.backend().c_str(), comm::counted(p, "rank").c_str(), threads);
    std::printf("  model: %d x Linear(%d, %d) + Tanh, %lld parameters; Adam, lr %g; %d rows per rank\n", o.layers,
                o.width, o.width, static_cast<long long>(psi), o.lr, o.rows);
  }

  parts.begin(comm, "The accounting");
  if (me == 0) print_accounting(psi, p);

  parts.begin(comm, "Memory per rank");
  lesson.reference();
  std::vector<Run> runs;
  runs.push_back(lesson.ddp());
  runs.push_back(lesson.zero12<zero::Zero1>("ZeRO-1", Stage::kZero1));
  runs.push_back(lesson.zero12<zero::Zero2>("ZeRO-2", Stage::kZero2));
  runs.push_back(lesson.zero3(/*prefetch=*/true));
  runs.push_back(lesson.zero3(/*prefetch=*/false));
  bool ok = true;
  if (me == 0) {
    std::printf("\n2. Memory per rank after a step, measured (the largest rank's), beside the accounting\n");
    std::printf("  %-19s %9s %9s %9s %9s %9s | %9s %6s\n", "MB", "params", "grads", "optimizer", "buffers", "states",
                "formula", "ratio");
    for (const Run& r : runs) {
      const double ratio = static_cast<double>(r.measured.model_states()) / static_cast<double>(r.formula.model_states());
      std::printf("  %-19s %9s %9s %9s %9s %9s | %9s %6.3f\n", r.name.c_str(), mb_number(r.measured.parameters).c_str(),
                  mb_number(r.measured.gradients).c_str(), mb_number(r.measured.optimizer_state).c_str(),
                  mb_number(r.measured.buffers).c_str(), mb_number(r.measured.model_states()).c_str(),
                  mb_number(r.formula.model_states()).c_str(), ratio);
    }
    std::printf("  states = params + grads + optimizer; buffers: DDP's buckets, ZeRO's most at once\n");
    if (runs.front().measured.activations > 0) {  // a process per rank: each forward measured
      int64_t least = runs.front().measured.activations, most = least;
      for (const Run& r : runs) {
        least = std::min(least, r.measured.activations);
        most = std::max(most, r.measured.activations);
      }
      std::printf("  activations kept by each stage's forward, measured: %s .. %s\n", mb(least).c_str(),
                  mb(most).c_str());
    } else {
      std::printf("  activations (rank 0's forward, measured): %s\n", mb(lesson.activations()).c_str());
    }
    bool decreasing = true;
    for (size_t i = 1; i < 4; ++i)
      decreasing = decreasing && runs[i].measured.model_states() < runs[i - 1].measured.model_states();
    std::printf("  DDP > ZeRO-1 > ZeRO-2 > ZeRO-3: %s\n", decreasing ? "yes" : "NO");
    ok = ok && decreasing;
    std::printf("  Look: DDP's buffers are its buckets, a second copy of the gradients (unless\n"
                "  gradient_as_bucket_view). ZeRO-1 keeps one gradient: the 1/p it steps is a view of it.\n"
                "  ZeRO-2's buckets and ZeRO-3's unit gradients live only until reduce-scattered.\n"
                "  ZeRO shards model states, not activations: those grow with the batch.\n");
  }

  parts.begin(comm, "Bytes per step");
  if (me == 0) {
    std::printf("\n3. Bytes per step rank 0 sent, read from the trace's ring steps, beside the accounting\n");
    std::printf("  %-20s %12s %12s %8s\n", "", "sent", "formula", "ratio");
    for (const Run& r : runs) {
      const int64_t times = r.stage == Stage::kZero3 ? 3 : 2;
      const double formula = static_cast<double>(times) * 4.0 * static_cast<double>(psi) * (p - 1) / p;
      std::printf("  %-20s %12s %12s %8.3f   (%lld Psi (p-1)/p)\n", r.name.c_str(), mb(r.sent_bytes).c_str(),
                  format_megabytes(formula).c_str(), static_cast<double>(r.sent_bytes) / formula,
                  static_cast<long long>(times));
    }
  }

  parts.begin(comm, "Step time");
  if (me == 0) {
    std::printf("\n4. Step time, the median of %s (slowest rank)\n", comm::counted(o.steps, "step").c_str());
    for (const Run& r : runs)
      std::printf("  %-20s %10s   %.2fx DDP\n", r.name.c_str(), format_seconds(r.seconds).c_str(),
                  r.seconds / runs[0].seconds);
    std::printf("  Look: ZeRO-1 and -2 send DDP's bytes, ZeRO-3 half as much again. Each rank also steps\n"
                "  only its 1/p of Adam, which DDP's ranks each do whole: where ranks share cores (here)\n"
                "  that can outweigh the rest. Prefetch puts the next all-gather under compute (part 6).\n");
  }

  parts.begin(comm, "The same parameters");
  if (me == 0) {
    std::printf("\n5. The same parameters? After %d Adam steps, against one process on the whole batch (%d rows)\n", o.steps + 1,
                o.rows * p);
    for (const Run& r : runs) {
      const bool same = r.difference < 1e-4;
      ok = ok && same;
      std::printf("  %-19s largest difference %.3g   %s\n", r.name.c_str(), r.difference, same ? "OK" : "DIFFERENT");
    }
  }

  parts.begin(comm, "ZeRO-3 in the trace");
  if (me == 0) {
    std::printf("\n6. ZeRO-3 in the trace: one step of rank 0 ('=' compute, '.' waits, '#' collectives)\n");
    print_zero3_step(runs[3].events, comm.world_rank(), runs[3].traced_step);
    for (size_t i : {size_t{3}, size_t{4}}) {
      const auto overlap = zero::comm_overlap_of_step(runs[i].events, comm.world_rank(), runs[i].traced_step,
                                                      {"zero_forward", "backward"});
      std::printf("  %-19s %2d collectives for %9s, %9s of it under compute: %3.0f%%\n", runs[i].name.c_str(),
                  overlap.collectives, format_seconds(overlap.comm_us * 1e-6).c_str(),
                  format_seconds(overlap.hidden_us * 1e-6).c_str(), 100 * overlap.fraction());
    }
    if (!o.job.trace.file.empty())
      std::printf("  the whole run is in the trace file: distlab-viz --panel memory --trace %s, or Perfetto\n",
                  o.job.trace.file.c_str());
    std::printf("\nNext: --backend gloo under distlab-run --nproc-per-node 4 (one process per rank: each rank's own\n"
                "memory), --rows 64 (more compute to hide the gathers behind); then distlab-bench zero.\n");
  }
  // Every rank fails together when a check did not hold on rank 0.
  at::Tensor good = at::tensor({ok ? 1.0 : 0.0}, at::kDouble).to(comm.device());
  comm.native_all_reduce(good, comm::ReduceOp::kMin);
  if (good.cpu().item<double>() < 1) throw std::runtime_error("a check did not hold (see above)");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  lessons::Parts parts({"The accounting", "Memory per rank", "Bytes per step", "Step time", "The same parameters",
                        "ZeRO-3 in the trace"});
  CLI::App app{"Lesson 12: ZeRO-1, -2 and -3 beside DDP: memory per rank, bytes per step, step time, equality"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--width", o.width, "features of each Linear layer")->check(CLI::Range(8, 8192))
      ->capture_default_str();
  app.add_option("--layers", o.layers, "Linear layers (ZeRO-3's units)")->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--rows", o.rows, "rows per rank per step")->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--steps", o.steps, "timed steps per stage, after one untimed")->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--lr", o.lr, "Adam's learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op threads per rank (0: cores / ranks on this machine)")
      ->check(CLI::Range(0, 256))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return lessons::run_lesson("lesson_12_zero_sharding", o.job, [&](comm::Communicator& comm) { run(comm, o, parts); });
}
