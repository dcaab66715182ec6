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
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <iostream>
#include <string>
#include <vector>

#include "comm/job.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
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
};

Run train(comm::Communicator& comm, bool find_unused, bool in_place) {
  auto net = std::make_shared<Net>(find_unused);
  ddp::DdpOptions options;
  options.in_place = in_place;
  options.find_unused_parameters = find_unused;
  options.bucket_cap_bytes = options.first_bucket_bytes = 32 << 10;
  ddp::DistributedDataParallel ddp(comm, net, options);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.05));
  auto loss_of = [&](int step, int micro) {
    torch::manual_seed(static_cast<uint64_t>(1000 * step + 10 * micro + comm.rank()));
    const at::Tensor x = torch::randn({6, 4});
    at::Tensor loss = net->body->forward(x).pow(2).mean();
    if (find_unused && comm.rank() == 0) loss = loss + net->spare->forward(x).sum() * 0.1;
    return loss;
  };
  Run run;
  for (int step = 0; step < 4; ++step) {
    compat::zero_grad(sgd);
    if (step > 0) {
      auto guard = ddp.no_sync();
      ddp.forward([&] { return loss_of(step, 1); }).backward();
    }
    ddp.forward([&] { return loss_of(step, 0); }).backward();
    run.grads.emplace_back();
    for (const at::Tensor& p : net->parameters()) run.grads.back().push_back(p.grad().clone());
    sgd.step();
  }
  for (const at::Tensor& p : net->parameters()) run.params.push_back(p.detach().clone());
  run.buckets = ddp.bucket_plan().buckets.size();
  run.buffers = ddp.reducer().bucket_buffers().size();
  return run;
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
        const bool same = worst.value == 0.0 && buffered.buffers == buffered.buckets;
        ok = ok && same;
        std::cout << (same ? "" : "MISMATCH ") << "rank " << comm.rank() << " of " << comm.size()
                  << (find_unused ? " (find_unused_parameters)" : "") << ": " << in_place.buckets - in_place.buffers
                  << " of " << in_place.buckets << " buckets in place, largest difference from the buffered run "
                  << worst.value << std::endl;
      }
    });
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return ok ? 0 : 1;
}
