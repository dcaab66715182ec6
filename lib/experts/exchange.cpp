#include "experts/exchange.hpp"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <numeric>
#include <stdexcept>

#include "collectives/collectives.hpp"

namespace distlab::experts {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor all_to_all_rows(comm::Communicator& comm, const at::Tensor& rows, const std::vector<int64_t>& send,
                           const std::vector<int64_t>& recv, int tag) {
  if (static_cast<int>(send.size()) != comm.size() || static_cast<int>(recv.size()) != comm.size())
    throw std::invalid_argument("exchange_rows: one count per rank of " + comm.self());
  std::vector<int64_t> shape(rows.sizes().begin(), rows.sizes().end());
  shape[0] = std::accumulate(recv.begin(), recv.end(), int64_t{0});
  at::Tensor out = at::empty(shape, rows.options());
  collectives::all_to_all_v(comm, rows.contiguous(), out, send, recv, collectives::Algorithm::kPairwise, tag);
  return out;
}

struct ExchangeRows : torch::autograd::Function<ExchangeRows> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& rows, comm::Communicator* comm,
                            std::vector<int64_t> send, std::vector<int64_t> recv, int64_t tag) {
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(comm);
    ctx->saved_data["send"] = send;
    ctx->saved_data["recv"] = recv;
    ctx->saved_data["tag"] = tag;
    return all_to_all_rows(*comm, rows, send, recv, static_cast<int>(tag));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto& comm = *reinterpret_cast<comm::Communicator*>(ctx->saved_data["comm"].toInt());
    const std::vector<int64_t> send = ctx->saved_data["send"].toIntVector();
    const std::vector<int64_t> recv = ctx->saved_data["recv"].toIntVector();
    // Each row's gradient back to the rank it came from: the counts swapped.
    return {all_to_all_rows(comm, grads[0], recv, send, static_cast<int>(ctx->saved_data["tag"].toInt())),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor exchange_rows(comm::Communicator& comm, const at::Tensor& rows, const std::vector<int64_t>& send_rows,
                         const std::vector<int64_t>& recv_rows, int tag) {
  return ExchangeRows::apply(rows, &comm, send_rows, recv_rows, static_cast<int64_t>(tag));
}

at::Tensor exchange_counts(comm::Communicator& comm, const at::Tensor& counts, int tag) {
  if (counts.dim() != 2 || counts.size(0) != comm.size())
    throw std::invalid_argument("exchange_counts: (ranks, kinds) counts on " + comm.self());
  const at::Tensor mine = counts.to(comm.device(), at::kLong).contiguous();
  at::Tensor out = at::empty_like(mine);
  collectives::all_to_all(comm, mine, out, collectives::Algorithm::kPairwise, tag);
  return out.cpu();
}

}  // namespace distlab::experts
