#include "ddp/replicas.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <functional>
#include <sstream>
#include <unordered_set>

#include "collectives/collectives.hpp"
#include "flight/site.hpp"

namespace distlab::ddp {

NamedTensors trainable_parameters(const torch::nn::Module& module) {
  NamedTensors out;
  std::unordered_set<const void*> seen;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    out.emplace_back(item.key(), p);
  }
  return out;
}

std::vector<at::Tensor> tensors_of(const NamedTensors& named) {
  std::vector<at::Tensor> out;
  for (const auto& item : named) out.push_back(item.second);
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

std::string list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

void verify_same_parameters(comm::Communicator& comm, const NamedTensors& named, const std::string& who,
                            const std::function<std::string(size_t index)>& where) {
  const int p = comm.size();
  if (p == 1) return;
  flight::Site site(who + " set-up: every rank's parameters compared");
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
    std::string this_rank;
    if (j == 0)
      this_rank = "this rank has " + std::to_string(named.size()) + " parameters";
    else if (j - 1 < static_cast<int64_t>(named.size()))
      this_rank = "this rank has " + describe(named[static_cast<size_t>(j - 1)].first,
                                              named[static_cast<size_t>(j - 1)].second) +
                  (where ? " " + where(static_cast<size_t>(j - 1)) : std::string());
    else
      this_rank = "this rank has no parameter " + std::to_string(j - 1);
    throw comm::CommError(comm.self() + ": " + who + ": " +
                          (j == 0 ? std::string("the number of parameters")
                                  : "parameter " + std::to_string(j - 1)) +
                          " differs across ranks (" + this_rank + "): ranks " + list(agree) +
                          " agree with rank 0, ranks " + list(differ) + " differ. Every replica must build the same model.");
  }
}

void broadcast_from_rank0(comm::Communicator& comm, const std::vector<at::Tensor>& tensors) {
  if (comm.size() == 1) return;
  torch::NoGradGuard no_grad;
  flight::Site site("rank 0's values broadcast");
  for (const at::Tensor& t : tensors) {
    at::Tensor work = t.is_contiguous() ? t : t.contiguous();
    comm.native_broadcast(work, 0);
    if (!work.is_same(t)) t.copy_(work);
  }
}

}  // namespace distlab::ddp
