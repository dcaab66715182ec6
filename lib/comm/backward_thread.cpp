#include "comm/backward_thread.hpp"

#include <torch/csrc/autograd/engine.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "comm/errors.hpp"

namespace distlab::comm {

struct CallerQueue {
  std::thread::id owner;
  std::mutex mutex;
  std::vector<std::function<void()>> work;

  void push(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mutex);
    work.push_back(std::move(fn));
  }
  std::vector<std::function<void()>> take() {
    std::lock_guard<std::mutex> lock(mutex);
    return std::exchange(work, {});
  }
};

namespace {

thread_local int this_engine_device = -1;
std::atomic<bool> hand_over_always{false};

// This thread's queue of work handed over by backwards it called.
const std::shared_ptr<CallerQueue>& this_thread_queue() {
  thread_local std::shared_ptr<CallerQueue> queue;
  if (!queue) {
    queue = std::make_shared<CallerQueue>();
    queue->owner = std::this_thread::get_id();
  }
  return queue;
}

// Runs the handed-over work in the order it came, all of it even when one
// throws (each belongs to a different reducer); rethrows the first error.
void run_handed_over() {
  std::exception_ptr first;
  for (auto& fn : this_thread_queue()->take()) {
    try {
      fn();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

// PyTorch's engine, its device threads naming their device, its backward
// running the work handed to the caller before it returns.
class Engine final : public torch::autograd::Engine {
 public:
  ~Engine() override { stop(); }

  static Engine& instance() {
    static Engine engine;
    return engine;
  }

  void thread_init(int device, const std::shared_ptr<torch::autograd::ReadyQueue>& ready_queue,
                   bool should_increment) override {
    this_engine_device = device;
    torch::autograd::Engine::thread_init(device, ready_queue, should_increment);
  }

  torch::autograd::variable_list execute(const torch::autograd::edge_list& roots,
                                         const torch::autograd::variable_list& inputs, bool keep_graph,
                                         bool create_graph, bool accumulate_grad,
                                         const torch::autograd::edge_list& outputs) override {
    torch::autograd::variable_list grads;
    try {
      grads = torch::autograd::Engine::execute(roots, inputs, keep_graph, create_graph, accumulate_grad, outputs);
    } catch (...) {
      this_thread_queue()->take();  // the backward failed: its reducers report that, not their buckets
      throw;
    }
    run_handed_over();
    return grads;
  }

 private:
  Engine() = default;
};

torch::autograd::Engine& engine_stub() { return Engine::instance(); }

// Before main, so before any backward: every backward of the program runs on it.
[[maybe_unused]] const bool installed = [] {
  torch::autograd::set_default_engine_stub(&engine_stub);
  return true;
}();

}  // namespace

int engine_device_thread() { return this_engine_device; }

BackwardCaller::BackwardCaller() = default;

void BackwardCaller::capture() { queue_ = this_thread_queue(); }

void BackwardCaller::at_end(std::function<void()> fn) const {
  auto& engine = torch::autograd::Engine::get_default_engine();
  const bool on_caller = queue_ && queue_->owner == std::this_thread::get_id() && !hand_over_always;
  if (!queue_ || on_caller) {
    engine.queue_callback(std::move(fn));
    return;
  }
  engine.queue_callback([queue = queue_, fn = std::move(fn)]() mutable { queue->push(std::move(fn)); });
}

std::string shared_engine_thread_reason() {
  return "PyTorch runs the CUDA backward of every thread of a process on one engine thread per GPU, and tensor "
         "and context parallelism, experts and ZeRO-3 wait for other ranks in the middle of the backward, which "
         "that thread would never get past. Run them with one process per GPU (distlab-run --nproc-per-node "
         "<GPUs> ... --backend nccl), or as thread ranks on the CPU; DDP, ZeRO-1/2 and every pipeline schedule run "
         "as thread ranks sharing a GPU";
}

void refuse_wait_on_engine_thread(const std::string& self, const std::string& waiting_for) {
  if (this_engine_device < 0) return;
  const std::string gpu = "cuda:" + std::to_string(this_engine_device);
  throw CommError(self + ": would wait for " + waiting_for +
                  " inside a backward, on the autograd engine's thread for " + gpu +
                  ", which the backward of every thread rank on " + gpu + " runs on. " +
                  shared_engine_thread_reason() + ".");
}

void hand_over_for_tests(bool on) { hand_over_always = on; }

void pretend_engine_device_thread_for_tests(int device) { this_engine_device = device; }

}  // namespace distlab::comm
