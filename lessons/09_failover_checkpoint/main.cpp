// Lesson 09: failover with checkpoints.
//
// Data-parallel training of a small MLP (4 -> 16 -> 1, tanh) on synthetic
// regression data: every rank draws the same global batch of 32 from one
// seeded generator and trains on its slice; the gradients are summed with
// the backend's all-reduce and divided by the world size; SGD with momentum
// updates every replica the same way. Rank 0 saves a checkpoint every
// --save-every steps (lib/checkpoint/checkpointer.hpp): parameters, momentum
// buffers, the data generator's state, step, epoch, data position.
//
// --kill-rank R --kill-at-step S makes rank R SIGKILL itself at step S on
// the first attempt only (restart count 0). The launcher (distlab-run or
// torchrun with --max-restarts) restarts every rank; they resume from the
// newest complete checkpoint and print where. The final parameters' digest
// is bit-for-bit the one of a run that was never interrupted (CPU, one
// thread per rank): --expect-digest checks it.
//
// When the lost ranks do not come back, the job goes on with the others:
// run it again on fewer processes and it resumes from the same checkpoint
// (each rank then trains on more rows of the same global batch), and on
// more when they return; the sums then add in another order, so the
// result is the uninterrupted run's to float rounding, not bit for bit.
//
// The flight recorder's files (a rank's last collectives, written when it
// fails, times out or gets SIGTERM from its launcher after a peer died) go
// to --flight-dir, by default the checkpoint folder's flight/ (or
// DISTLAB_FLIGHT_DIR): `distlab-trace why checkpoints_09/flight` reads them.
//
//   distlab-run --nproc-per-node 2 --max-restarts 1 -- \
//     lesson_09_failover_checkpoint --backend gloo --kill-rank 1 --kill-at-step 25
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "comm/env.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "lesson.hpp"
#include "checkpoint/checkpointer.hpp"
#include "checkpoint/module_state.hpp"
#include "compat/torch.hpp"

using namespace distlab;

namespace {

struct Options {
  comm::JobOptions job;
  std::string checkpoint_dir = "checkpoints_09";
  int steps = 60;
  int steps_per_epoch = 20;
  int save_every = 10;
  int keep = 3;
  int batch = 32;  // the global batch; each rank trains on batch / world size rows
  double lr = 0.05;
  double momentum = 0.9;
  int kill_rank = -1;
  int kill_at_step = -1;
  std::string fail_how = "kill";
  std::string expect_digest;
  bool fresh = false;  // delete the checkpoint folder first (first attempt only)
  int pause_ms = 0;  // after each step: time to kill a launcher by hand mid-run
  // Where the flight recorder's files go (flight.rank<N>.json, written on a
  // failure, a timeout or SIGTERM): "" is DISTLAB_FLIGHT_DIR when set, else
  // the checkpoint folder's flight/, so that a killed run leaves nothing in
  // the working directory and its records sit beside its checkpoints.
  std::string flight_dir;
};

struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(4, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 1));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(at::tanh(fc1->forward(x))); }  // (n, 4) -> (n, 1)
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// Where this rank sits: under a launcher from its variables; thread ranks
// are all on this node.
struct Place {
  int rank = 0, local_rank = 0, local_world = 1, node = 0, restart = 0;
};

Place place_of(const comm::Communicator& comm) {
  Place p;
  p.rank = comm.rank();
  if (comm.backend() == "threads") {
    p.local_rank = comm.rank();
    p.local_world = comm.size();
    return p;
  }
  const comm::WorldInfo world = comm::world_from_env();
  p.local_rank = world.local_rank;
  p.local_world = world.local_world_size;
  p.restart = world.restart_count;
  if (const char* group = std::getenv("GROUP_RANK")) p.node = std::atoi(group);
  return p;
}

// Everything that must come back for the rest of the run to be the same.
struct TrainState {
  Net net;
  std::map<std::string, at::Tensor> momentum;  // one buffer per parameter, by name
  at::Generator data = at::detail::createCPUGenerator(1234);
  std::int64_t step = 0;  // steps done
};

checkpoint::CheckpointPart to_part(TrainState& s, const Options& o, const Place& p, int world_size) {
  checkpoint::CheckpointPart part;
  part.model = checkpoint::named_state(s.net);
  for (const auto& [name, buffer] : s.momentum) part.tensors["optimizer/momentum/" + name] = buffer;
  part.tensors["rng/data"] = s.data.get_state();
  part.ints = {{"step", s.step}, {"epoch", s.step / o.steps_per_epoch}, {"data_position", s.step * o.batch},
               {"world_size", world_size}};
  part.reals = {{"optimizer/lr", o.lr}, {"optimizer/momentum", o.momentum}};
  part.texts = {{"written_by", "rank " + std::to_string(p.rank) + " (local rank " + std::to_string(p.local_rank) +
                                   ", node " + std::to_string(p.node) + "), restart " + std::to_string(p.restart)}};
  return part;
}

void from_part(TrainState& s, const checkpoint::CheckpointPart& part) {
  checkpoint::load_named_state(s.net, part.model);
  for (auto& [name, buffer] : s.momentum) buffer.copy_(part.tensors.at("optimizer/momentum/" + name));
  s.data.set_state(part.tensors.at("rng/data"));
  s.step = part.ints.at("step");
}

// Rank 0 picks the checkpoint and tells everybody, so that all ranks resume
// from the same one even if the folder changes under them.
void resume(comm::Communicator& comm, TrainState& s, const checkpoint::Checkpointer& checkpoints, const Place& p,
            int64_t batch, int64_t steps) {
  at::Tensor chosen = at::full({1}, -1, at::kLong);
  if (p.rank == 0) {
    auto latest = checkpoints.latest_complete([](const std::string& line) { std::printf("[RANK 0] %s\n", line.c_str()); });
    if (latest) chosen.fill_(*latest);
  }
  comm.native_broadcast(chosen, 0);
  const std::int64_t step = chosen.item<std::int64_t>();
  if (step < 0) {
    if (p.rank == 0) std::printf("[RANK 0] no checkpoint in %s: training from step 0\n", checkpoints.dir().c_str());
    return;
  }
  // A first attempt that finds checkpoints found an earlier run's: going on
  // from them is the point after a failure, a surprise otherwise.
  if (p.rank == 0 && p.restart == 0)
    std::printf("[RANK 0] resuming from %s (step %lld of %lld), left by an earlier run: --fresh (or deleting %s) "
                "starts from step 0\n",
                checkpoints.folder(step).c_str(), static_cast<long long>(step), static_cast<long long>(steps),
                checkpoints.dir().c_str());
  const checkpoint::CheckpointPart part = checkpoints.load(step, 0);
  from_part(s, part);
  std::printf("[RANK %d] resumed from %s: step %lld, epochs done %lld, data position %lld (saved by %s)\n", p.rank,
              checkpoints.folder(step).c_str(), static_cast<long long>(step),
              static_cast<long long>(part.ints.at("epoch")), static_cast<long long>(part.ints.at("data_position")),
              part.texts.at("written_by").c_str());
  // Fewer ranks (or more) than wrote it: nothing to convert. The model and
  // momentum are whole in the checkpoint, every rank draws the whole batch
  // from the saved generator, and the averaged gradient is the whole
  // batch's mean whatever the world size: only the rows per rank change.
  const auto written = part.ints.find("world_size");
  if (p.rank == 0 && written != part.ints.end() && written->second != comm.size())
    std::printf("[RANK 0] the checkpoint was written by %lld ranks; %d go on, %lld of the %lld rows each (was %lld)\n",
                static_cast<long long>(written->second), comm.size(), static_cast<long long>(batch / comm.size()),
                static_cast<long long>(batch), static_cast<long long>(batch / written->second));
}

// One step: this rank's slice of the global batch, gradients averaged over
// the ranks, SGD with momentum. Returns the global mean loss.
double train_step(comm::Communicator& comm, TrainState& s, const Options& o) {
  static const at::Tensor w_true = at::tensor({0.5f, -1.0f, 0.25f, 2.0f}).view({4, 1});
  // Every rank draws the whole batch, so one generator state describes all ranks.
  const at::Tensor x = at::randn({o.batch, 4}, s.data);                           // (32, 4)
  const at::Tensor y = at::sin(x.matmul(w_true)) + 0.1 * at::randn({o.batch, 1}, s.data);  // (32, 1)
  const int64_t rows = o.batch / comm.size(), first = comm.rank() * rows;
  const at::Tensor prediction = s.net.forward(x.narrow(0, first, rows));
  at::Tensor loss = (prediction - y.narrow(0, first, rows)).pow(2).mean();
  compat::zero_grad(s.net);
  loss.backward();
  at::NoGradGuard no_grad;
  for (auto& item : s.net.named_parameters()) {
    at::Tensor grad = item.value().grad();
    comm.native_all_reduce(grad);  // sum over ranks, in place
    grad.div_(comm.size());
    at::Tensor& buffer = s.momentum.at(item.key());
    buffer.mul_(o.momentum).add_(grad);
    item.value().sub_(o.lr * buffer);
  }
  at::Tensor mean_loss = loss.detach().clone();
  comm.native_all_reduce(mean_loss);
  ++s.step;
  return mean_loss.item<double>() / comm.size();
}

void run(comm::Communicator& comm, const Options& o, lessons::Parts& parts) {
  const Place p = place_of(comm);
  if (o.kill_rank >= 0 && comm.backend() == "threads")
    throw std::runtime_error("--kill-rank needs one process per rank: use --backend gloo under distlab-run or torchrun "
                             "with --max-restarts (a thread rank that dies takes the whole process with it)");
  if (o.batch % comm.size() != 0)
    throw std::runtime_error("rank " + std::to_string(p.rank) + ": --batch " + std::to_string(o.batch) +
                             " does not split evenly over " + std::to_string(comm.size()) + " ranks; pick a multiple");
  parts.begin(comm, "Where each rank sits");
  std::printf("[RANK %d] LOCAL_RANK %d of %d on node %d, WORLD_SIZE %d, restart %d, pid %d\n", p.rank, p.local_rank,
              p.local_world, p.node, comm.size(), p.restart, static_cast<int>(::getpid()));
  if (p.rank == 0)
    std::printf("[RANK 0] RANK is unique in the job and saves the checkpoints; LOCAL_RANK picks the GPU on a node.\n");

  TrainState s;
  // The same initial weights on every rank, from a generator of our own
  // (thread ranks share the global one).
  at::Generator init = at::detail::createCPUGenerator(0);
  {
    at::NoGradGuard no_grad;
    for (auto& item : s.net.named_parameters()) item.value().copy_(at::randn(item.value().sizes(), init) * 0.5);
  }
  for (const auto& item : s.net.named_parameters()) s.momentum[item.key()] = at::zeros_like(item.value());
  // Only the first attempt starts afresh: a restarted one resumes from what it saved.
  if (o.fresh && p.rank == 0 && p.restart == 0) {
    std::filesystem::remove_all(o.checkpoint_dir);
    std::error_code ignored;
    std::filesystem::create_directories(o.flight_dir, ignored);  // it may have been inside
    std::printf("[RANK 0] --fresh: deleted %s\n", o.checkpoint_dir.c_str());
  }
  const checkpoint::Checkpointer checkpoints(o.checkpoint_dir, /*num_stages=*/1, o.keep);
  parts.begin(comm, "Resume from the newest checkpoint");
  resume(comm, s, checkpoints, p, o.batch, o.steps);

  parts.begin(comm, "Train and save checkpoints");
  while (s.step < o.steps) {
    if (p.rank == o.kill_rank && s.step == o.kill_at_step && p.restart == 0) {
      std::printf("[RANK %d] failing on purpose at step %lld (--kill-rank %d --kill-at-step %d, %s)\n", p.rank,
                  static_cast<long long>(s.step), o.kill_rank, o.kill_at_step, o.fail_how.c_str());
      std::fflush(stdout);
      if (o.fail_how == "kill") std::raise(SIGKILL);
      throw std::runtime_error("rank " + std::to_string(p.rank) + ": failing on purpose at step " +
                               std::to_string(s.step) + " (--fail-how throw)");
    }
    const double loss = train_step(comm, s, o);
    if (o.pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.pause_ms));
    if (s.step % o.save_every == 0 || s.step == o.steps) {
      if (p.rank == 0) {
        const std::string folder = checkpoints.save(s.step, 0, to_part(s, o, p, comm.size()));
        std::printf("[RANK 0] step %3lld  epochs done %lld  loss %.6f  saved %s\n", static_cast<long long>(s.step),
                    static_cast<long long>(s.step / o.steps_per_epoch), loss, folder.c_str());
      }
    }
  }
  parts.begin(comm, "The final parameters");
  const std::string digest = checkpoint::state_digest(checkpoint::named_state(s.net));
  std::printf("[RANK %d] final parameters digest %s after %s\n", p.rank, digest.c_str(),
              comm::counted(s.step, "step").c_str());
  if (!o.expect_digest.empty()) {
    if (digest != o.expect_digest)
      throw std::runtime_error("rank " + std::to_string(p.rank) + ": final parameters digest " + digest +
                               " differs from --expect-digest " + o.expect_digest +
                               " (same flags, world size and backend as the uninterrupted run?)");
    if (p.rank == 0) std::printf("[RANK 0] equal to the uninterrupted run's digest: resumed bit for bit\n");
  }
  if (p.rank == 0)
    std::printf("\nNext: --kill-rank 0 (the rank that saves dies), --fail-how throw under torchrun (its summary names\n"
                "the error), two distlab-run launchers as two nodes (--nnodes 2 --node-rank 0|1), a bit flipped in\n"
                "the newest checkpoint (the run goes back one).\n");
}

// What state_digest prints, checked before the run rather than compared
// after it: "0x" and 8 lowercase hex digits (uppercase is taken too).
const CLI::Validator kDigestForm(
    [](std::string& text) -> std::string {
      const bool hex = text.size() == 10 && text.compare(0, 2, "0x") == 0 &&
                       text.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string::npos;
      if (!hex) return "'" + text + "' is not a digest: 0x and 8 hex digits, as a run prints it (e.g. 0xadb92151)";
      for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return "";
    },
    "DIGEST");

}  // namespace

int main(int argc, char** argv) {
  Options o;
  // The parts print no headings of their own: every line is a rank's log line.
  lessons::Parts parts({"Where each rank sits", "Resume from the newest checkpoint", "Train and save checkpoints",
                        "The final parameters"});
  CLI::App app{"Lesson 09: failover with checkpoints (kill a rank, restart all, resume from the last checkpoint)"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--checkpoint-dir", o.checkpoint_dir, "folder of the checkpoints (shared by all ranks)")
      ->capture_default_str();
  app.add_option("--steps", o.steps, "training steps in all")->check(CLI::Range(1, 1000000))->capture_default_str();
  app.add_option("--steps-per-epoch", o.steps_per_epoch, "steps in one epoch")->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--save-every", o.save_every, "rank 0 saves after every N steps")->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--keep", o.keep, "checkpoints kept")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--batch", o.batch, "global batch (a multiple of the world size)")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--kill-rank", o.kill_rank, "this rank fails at --kill-at-step, on the first attempt only")
      ->capture_default_str();
  app.add_option("--kill-at-step", o.kill_at_step, "the step at which --kill-rank fails")->capture_default_str();
  app.add_option("--fail-how", o.fail_how, "kill: SIGKILL itself; throw: an exception (torchrun's error file)")
      ->check(CLI::IsMember({"kill", "throw"}))
      ->capture_default_str();
  app.add_option("--pause-ms", o.pause_ms,
                 "sleep this long after each step: time to kill a rank or a whole launcher by hand mid-run")
      ->check(CLI::Range(0, 60000))
      ->capture_default_str();
  app.add_option("--expect-digest", o.expect_digest,
                 "the digest an uninterrupted run printed (0x and 8 hex digits); exit 1 when the final parameters "
                 "differ")
      ->check(kDigestForm);
  app.add_flag("--fresh", o.fresh,
               "delete --checkpoint-dir first and train from step 0 (a restarted attempt still resumes)");
  app.add_option("--flight-dir", o.flight_dir,
                 "where every rank writes its flight recorder file flight.rank<N>.json on a failure, a timeout or "
                 "SIGTERM, and distlab-run how a failed worker ended (made if missing; sets DISTLAB_FLIGHT_DIR for "
                 "the job); default: DISTLAB_FLIGHT_DIR if set, else <checkpoint-dir>/flight");
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines appear as they happen under a launcher's pipe
  if (o.flight_dir.empty()) {
    const char* env = std::getenv("DISTLAB_FLIGHT_DIR");
    o.flight_dir = env != nullptr && *env != '\0' ? env : o.checkpoint_dir + "/flight";
  }
  std::error_code error;
  std::filesystem::create_directories(o.flight_dir, error);
  if (error) {
    std::fprintf(stderr, "lesson_09_failover_checkpoint: cannot make --flight-dir %s: %s\n", o.flight_dir.c_str(),
                 error.message().c_str());
    return 1;
  }
  setenv("DISTLAB_FLIGHT_DIR", o.flight_dir.c_str(), 1);  // read by the job's flight recorder (comm/job.cpp)
  at::set_num_threads(1);                    // one fixed order of additions: bit-for-bit repeatable
  return lessons::run_lesson("lesson_09_failover_checkpoint", o.job,
                             [&](comm::Communicator& comm) { run(comm, o, parts); });
}
