// One rank of DDP's in-place buckets over processes, started by distlab-run
// from in_place_test.cpp with DISTLAB_TEST_BACKEND=auto: buckets all-reduced
// where their gradients lie (ReducerOptions::in_place, the shared-memory
// transport reading the other ranks' .grad) against the same buckets through
// their buffers. The same training twice on one communicator: every
// synchronized step's gradients and the final parameters must be the same
// bit for bit. Small buckets (under the transport's one-copy size) go
// through their buffers in both, so a step mixes both kinds.
//
// Cases: plain; and find_unused_parameters with a layer only rank 0 uses
// (the other ranks' .grad of it is made zero in place). Each step after the
// first adds a micro-batch under no_sync first (gradients summed locally).
//
// That the path was taken, not only planned: the transport's own count of
// all-reduces of parts done in place (comm::one_copy_counts) grows, step by
// step, by the buckets the plan put in place, and not at all in the buffered
// run; the allocator meter sees DDP allocate its buffers' bytes and nothing
// more. Then one all-reduce of parts alone: what it read from the other
// ranks and what it allocated, printed for the test to hold to formulas.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "comm/job.hpp"
#include "comm/shm_links.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "memory/allocator_meter.hpp"
#include "support/differences.hpp"
#include "support/process_backend.hpp"

namespace {

using namespace distlab;

struct Net : torch::nn::Module {
  torch::nn::Sequential body{nullptr};
  torch::nn::Linear spare{nullptr};  // only rank 0 uses it (find_unused_parameters)
  explicit Net(bool with_spare) {
    torch::manual_seed(7);
    // The first layer's parameters, the last gradients, make a small last bucket.
    body = register_module(
        "body", torch::nn::Sequential(torch::nn::Linear(4, 64), torch::nn::Tanh(), torch::nn::Linear(64, 256),
                                      torch::nn::Tanh(), torch::nn::Linear(256, 256), torch::nn::Tanh(),
                                      torch::nn::Linear(256, 8)));
    if (with_spare) spare = register_module("spare", torch::nn::Linear(4, 4));
  }
};

struct Run {
  std::vector<std::vector<at::Tensor>> grads;  // per synchronized step, per parameter
  std::vector<at::Tensor> params;
  size_t buckets = 0, buffers = 0;  // of the last step's plan
  // Per synchronized step: the buckets its plan put in place, and the
  // all-reduces of parts the transport did in place meanwhile.
  std::vector<int64_t> planned, done;
  int64_t allocated = 0, buffer_bytes = 0;  // by DDP's construction (the meter); its buffers' bytes
};

int64_t bytes_of(const std::vector<at::Tensor>& tensors) {
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

Run train(comm::Communicator& comm, bool find_unused, bool in_place) {
  auto net = std::make_shared<Net>(find_unused);
  ddp::DdpOptions options;
  options.in_place = in_place;
  options.find_unused_parameters = find_unused;
  options.bucket_cap_bytes = options.first_bucket_bytes = 32 << 10;
  const memory::AllocatorMeter& meter = memory::AllocatorMeter::install();
  Run run;
  const int64_t before = meter.allocated();
  ddp::DistributedDataParallel ddp(comm, net, options);
  run.allocated = meter.allocated() - before;
  run.buffer_bytes = bytes_of(ddp.reducer().bucket_buffers());
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.05));
  auto loss_of = [&](int step, int micro) {
    torch::manual_seed(static_cast<uint64_t>(1000 * step + 10 * micro + comm.rank()));
    const at::Tensor x = torch::randn({6, 4});
    at::Tensor loss = net->body->forward(x).pow(2).mean();
    if (find_unused && comm.rank() == 0) loss = loss + net->spare->forward(x).sum() * 0.1;
    return loss;
  };
  for (int step = 0; step < 4; ++step) {
    compat::zero_grad(sgd);
    if (step > 0) {
      auto guard = ddp.no_sync();
      ddp.forward([&] { return loss_of(step, 1); }).backward();
    }
    const int64_t parts_before = comm::one_copy_counts().parts_all_reduces;
    ddp.forward([&] { return loss_of(step, 0); }).backward();
    run.done.push_back(comm::one_copy_counts().parts_all_reduces - parts_before);
    run.planned.push_back(static_cast<int64_t>(ddp.bucket_plan().buckets.size() - ddp.reducer().bucket_buffers().size()));
    run.grads.emplace_back();
    for (const at::Tensor& p : net->parameters()) run.grads.back().push_back(p.grad().clone());
    sgd.step();
  }
  for (const at::Tensor& p : net->parameters()) run.params.push_back(p.detach().clone());
  run.buckets = ddp.bucket_plan().buckets.size();
  run.buffers = ddp.reducer().bucket_buffers().size();
  return run;
}

std::string joined(const std::vector<int64_t>& values) {
  std::string text;
  for (const int64_t v : values) text += (text.empty() ? "" : " ") + std::to_string(v);
  return text;
}

// One all-reduce of parts alone: 3 parts, 3 MiB in all, rank r's values
// (r + 1) (j % 7 + i) (part i, element j), halved (scale 0.5): small
// integers and halves, so every order of the sum is exact.
bool parts_alone(comm::Communicator& comm) {
  const std::vector<int64_t> sizes = {300000, 250000, 236432};
  std::vector<at::Tensor> parts, expected;
  const double p = comm.size();
  for (size_t i = 0; i < sizes.size(); ++i) {
    const at::Tensor pattern = at::arange(sizes[i], at::kFloat).remainder(7) + static_cast<double>(i);
    parts.push_back(pattern * (comm.rank() + 1));
    expected.push_back(pattern * (0.5 * p * (p + 1) / 2));
  }
  memory::AllocatorMeter& meter = memory::AllocatorMeter::install();
  meter.reset_peak();
  const int64_t base = meter.allocated();
  const comm::OneCopyCounts before = comm::one_copy_counts();
  comm.native_all_reduce_parts(parts, 0.5);
  const comm::OneCopyCounts after = comm::one_copy_counts();
  bool equal = true;
  for (size_t i = 0; i < parts.size(); ++i) equal = equal && at::equal(parts[i], expected[i]);
  std::cout << (equal ? "" : "MISMATCH ") << "rank " << comm.rank() << " of " << comm.size() << ": parts of "
            << bytes_of(parts) << " bytes (" << parts.size() << " parts): " << after.parts_all_reduces - before.parts_all_reduces
            << " in place, " << after.bytes_read - before.bytes_read << " bytes read from the other ranks, "
            << meter.peak() - base << " bytes allocated at most, sums " << (equal ? "exact" : "WRONG") << std::endl;
  return equal;
}

}  // namespace

int main() {
  comm::JobOptions job;
  job.backend = distlab::testing::process_backend();
  bool ok = true;
  try {
    comm::run_job(comm::with_env_defaults(job), [&](comm::Communicator& comm) {
      for (bool find_unused : {false, true}) {
        const Run in_place = train(comm, find_unused, true), buffered = train(comm, find_unused, false);
        test_support::Worst worst;
        for (size_t s = 0; s < in_place.grads.size(); ++s)
          for (size_t i = 0; i < in_place.grads[s].size(); ++i) worst.add(in_place.grads[s][i], buffered.grads[s][i]);
        for (size_t i = 0; i < in_place.params.size(); ++i) worst.add(in_place.params[i], buffered.params[i]);
        // The transport did in place what each step's plan put there; the
        // buffered run did nothing in place; DDP allocated its buffers and
        // no more (within kSlack: what construction's broadcast keeps or
        // frees of LibTorch's own, a few hundred bytes).
        constexpr int64_t kSlack = 4096;
        const bool taken = in_place.done == in_place.planned &&
                           buffered.done == std::vector<int64_t>(buffered.done.size(), 0) &&
                           std::abs(in_place.allocated - in_place.buffer_bytes) <= kSlack &&
                           std::abs(buffered.allocated - buffered.buffer_bytes) <= kSlack;
        const bool same = worst.value == 0.0 && buffered.buffers == buffered.buckets && taken;
        ok = ok && same;
        std::cout << (same ? "" : "MISMATCH ") << "rank " << comm.rank() << " of " << comm.size()
                  << (find_unused ? " (find_unused_parameters)" : "") << ": " << in_place.buckets - in_place.buffers
                  << " of " << in_place.buckets << " buckets in place, largest difference from the buffered run "
                  << worst.value << std::endl;
        std::cout << "  in place per step: planned " << joined(in_place.planned) << ", done "
                  << joined(in_place.done) << "; buffered run done " << joined(buffered.done)
                  << "; DDP allocated " << in_place.allocated << " bytes (buffers " << in_place.buffer_bytes
                  << ") against " << buffered.allocated << " (buffers " << buffered.buffer_bytes << ")" << std::endl;
      }
      ok = parts_alone(comm) && ok;
    });
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return ok ? 0 : 1;
}
