#include "ddp/distributed_data_parallel.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <functional>
#include <sstream>
#include <unordered_set>

#include "collectives/collectives.hpp"

namespace distlab::ddp {

std::vector<std::pair<std::string, at::Tensor>> trainable_parameters(const torch::nn::Module& module) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  std::unordered_set<const void*> seen;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    out.emplace_back(item.key(), p);
  }
  return out;
}

namespace {

// A number for (name, shape, dtype): equal on two ranks iff (with
// overwhelming odds) the parameters agree: 40 bits of a hash.
int64_t fingerprint(const std::string& name, const at::Tensor& t) {
  std::ostringstream text;
  text << name << '|' << t.sizes() << '|' << t.scalar_type();
  return static_cast<int64_t>(std::hash<std::string>{}(text.str()) & ((int64_t{1} << 40) - 1));
}

std::string describe(const std::string& name, const at::Tensor& t) {
  std::ostringstream out;
  out << "'" << name << "' " << t.sizes() << " " << t.scalar_type();
  return out.str();
}

}  // namespace

void verify_same_parameters(comm::Communicator& comm, const std::vector<std::pair<std::string, at::Tensor>>& named) {
  const int p = comm.size();
  if (p == 1) return;
  const auto on_device = at::TensorOptions().dtype(at::kLong).device(comm.device());
  // How many parameters the longest list has, then everyone's fingerprints
  // (the list's length first, zero-padded to the longest), gathered.
  at::Tensor count = at::full({1}, static_cast<int64_t>(named.size()), on_device);
  comm.native_all_reduce(count, comm::ReduceOp::kMax);
  const int64_t n = count.item<int64_t>() + 1;  // + the list's length itself
  at::Tensor mine = at::zeros({n}, at::kLong);
  mine[0] = static_cast<int64_t>(named.size());
  for (size_t i = 0; i < named.size(); ++i)
    mine[static_cast<int64_t>(i) + 1] = fingerprint(named[i].first, named[i].second);
  mine = mine.to(comm.device());
  at::Tensor rows = at::empty({p * n}, on_device);
  collectives::all_gather(comm, mine, rows);
  rows = rows.view({p, n}).cpu();
  auto row = rows.accessor<int64_t, 2>();

  for (int64_t j = 0; j < n; ++j) {
    std::vector<int> agree, differ;
    for (int r = 0; r < p; ++r) (row[r][j] == row[0][j] ? agree : differ).push_back(r);
    if (differ.empty()) continue;
    auto list = [](const std::vector<int>& ranks) {
      std::string s;
      for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
      return s;
    };
    std::string mine;
    if (j == 0)
      mine = "this rank has " + std::to_string(named.size()) + " parameters";
    else if (j - 1 < static_cast<int64_t>(named.size()))
      mine = "this rank has " + describe(named[static_cast<size_t>(j - 1)].first, named[static_cast<size_t>(j - 1)].second);
    else
      mine = "this rank has no parameter " + std::to_string(j - 1);
    throw comm::CommError(comm.self() + ": DistributedDataParallel: " +
                          (j == 0 ? std::string("the number of parameters")
                                  : "parameter " + std::to_string(j - 1)) +
                          " differs across ranks (" + mine + "): ranks " + list(agree) + " agree with rank 0, ranks " +
                          list(differ) + " differ. Every replica must build the same model.");
  }
}

void broadcast_from_rank0(comm::Communicator& comm, const std::vector<at::Tensor>& tensors) {
  if (comm.size() == 1) return;
  torch::NoGradGuard no_grad;
  for (const at::Tensor& t : tensors) {
    at::Tensor work = t.is_contiguous() ? t : t.contiguous();
    comm.native_broadcast(work, 0);
    if (!work.is_same(t)) t.copy_(work);
  }
}

DistributedDataParallel::DistributedDataParallel(comm::Communicator& comm, std::shared_ptr<torch::nn::Module> module,
                                                 DdpOptions options)
    : comm_(comm), module_(std::move(module)), options_(options) {
  const auto named = trainable_parameters(*module_);
  verify_same_parameters(comm_, named);
  std::vector<at::Tensor> params;
  for (const auto& [name, tensor] : named) {
    names_.push_back(name);
    params.push_back(tensor);
  }
  for (const auto& item : module_->named_buffers(/*recurse=*/true)) buffers_.push_back(item.value());
  broadcast_from_rank0(comm_, params);
  broadcast_from_rank0(comm_, buffers_);
  reducer_ = std::make_unique<Reducer>(comm_, std::move(params), names_, options_);
}

void DistributedDataParallel::prepare_forward() {
  if (options_.broadcast_buffers) broadcast_from_rank0(comm_, buffers_);
  reducer_->prepare_for_backward(sync_);
}

}  // namespace distlab::ddp
