#include "context_parallel/ulysses.hpp"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/collectives.hpp"
#include "context_parallel/gathered_attention.hpp"

namespace distlab::context_parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void check_heads(const comm::Communicator& comm, const at::Tensor& x) {
  const int C = comm.size();
  if (x.dim() < 3)
    throw std::invalid_argument("Ulysses needs (..., heads, tokens, head dim), got " + std::to_string(x.dim()) +
                                " dimensions");
  if (x.size(-3) % C != 0)
    throw std::invalid_argument("Ulysses gives each of the " + std::to_string(C) + " ranks whole heads: " +
                                std::to_string(x.size(-3)) + " heads do not divide by " + std::to_string(C) +
                                " (ring or all-gather attention take any number of heads)");
}

// One all-to-all of C blocks stacked on dimension 0.
at::Tensor exchange(comm::Communicator& comm, const at::Tensor& blocks, int tag) {
  at::Tensor out = at::empty_like(blocks);
  collectives::all_to_all(comm, blocks, out, collectives::Algorithm::kPairwise, tag);
  return out;
}

at::Tensor heads_of(comm::Communicator& comm, const at::Tensor& x, int tag) {
  check_heads(comm, x);
  const int C = comm.size();
  const int64_t nd = x.dim();
  // (..., H, S, D) -> (..., C, H/C, S, D) -> (C, ..., H/C, S, D): block d
  // holds rank d's heads.
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape[nd - 3] = x.size(-3) / C;
  shape.insert(shape.begin() + (nd - 3), C);
  const at::Tensor blocks = x.reshape(shape).movedim(nd - 3, 0).contiguous();
  // Block s arrives from rank s: its tokens of my heads, in rank order.
  return at::cat(exchange(comm, blocks, tag).unbind(0), -2);
}

at::Tensor sequence_of(comm::Communicator& comm, const at::Tensor& y, int tag) {
  const int C = comm.size();
  const int64_t nd = y.dim();
  if (y.size(-2) % C != 0)
    throw std::invalid_argument("Ulysses: " + std::to_string(y.size(-2)) + " tokens do not split over " +
                                std::to_string(C) + " ranks");
  // (..., H/C, C S, D) -> (C, ..., H/C, S, D): block s holds rank s's tokens.
  const at::Tensor blocks = at::stack(y.chunk(C, -2), 0).contiguous();
  // Block s arrives from rank s: my tokens of its heads.
  at::Tensor back = exchange(comm, blocks, tag).movedim(0, nd - 3);
  std::vector<int64_t> shape(y.sizes().begin(), y.sizes().end());
  shape[nd - 3] = y.size(-3) * C;
  shape[nd - 2] = y.size(-2) / C;
  return back.reshape(shape);
}

comm::Communicator& comm_of(AutogradContext* ctx) {
  return *reinterpret_cast<comm::Communicator*>(ctx->saved_data["comm"].toInt());
}

// The two exchanges as one autograd function, each the other's backward.
template <bool kToHeads>
struct Exchange : torch::autograd::Function<Exchange<kToHeads>> {
  static at::Tensor run(comm::Communicator& comm, const at::Tensor& x, int tag, bool to_heads) {
    return to_heads ? heads_of(comm, x, tag) : sequence_of(comm, x, tag);
  }
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, comm::Communicator* comm, int64_t tag) {
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(comm);
    ctx->saved_data["tag"] = tag;
    return run(*comm, x, static_cast<int>(tag), kToHeads);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {run(comm_of(ctx), grads[0], static_cast<int>(ctx->saved_data["tag"].toInt()), !kToHeads), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor to_heads(comm::Communicator& comm, const at::Tensor& x, int tag) {
  return Exchange<true>::apply(x, &comm, static_cast<int64_t>(tag));
}

at::Tensor to_sequence(comm::Communicator& comm, const at::Tensor& x, int tag) {
  return Exchange<false>::apply(x, &comm, static_cast<int64_t>(tag));
}

BlockResult ulysses_attention(comm::Communicator& comm, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              double scale, const at::Tensor& positions, bool causal, int tag) {
  const at::Tensor qh = to_heads(comm, q, tag), kh = to_heads(comm, k, tag), vh = to_heads(comm, v, tag);
  BlockResult heads;
  if (causal) {
    const at::Tensor all = gather_positions(comm, positions, tag);
    heads = block_attention(qh, kh, vh, scale, all, all);
  } else {
    heads = block_attention(qh, kh, vh, scale);
  }
  return {to_sequence(comm, heads.out, tag), to_sequence(comm, heads.lse.unsqueeze(-1), tag).squeeze(-1)};
}

}  // namespace distlab::context_parallel
