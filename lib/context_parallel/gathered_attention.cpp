#include "context_parallel/gathered_attention.hpp"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <vector>

#include "collectives/collectives.hpp"

namespace distlab::context_parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor gather(comm::Communicator& comm, const at::Tensor& x, int tag) {
  const int C = comm.size();
  const at::Tensor mine = x.contiguous().reshape({-1});
  at::Tensor all = at::empty({C * mine.numel()}, mine.options());
  collectives::all_gather(comm, mine, all, collectives::Algorithm::kRing, tag);
  // (C, ..., S_local, D) -> (..., C S_local, D): rank r's tokens after rank r-1's.
  std::vector<int64_t> shape{C};
  for (int64_t size : x.sizes()) shape.push_back(size);
  std::vector<at::Tensor> pieces;
  for (const at::Tensor& piece : all.reshape(shape).unbind(0)) pieces.push_back(piece);
  return at::cat(pieces, -2);
}

// The gather's backward: every rank holds a gradient for the whole
// sequence (its queries' share of each key's); my tokens' gradient is the
// sum of every rank's rows for them: a reduce-scatter.
at::Tensor scatter_sum(comm::Communicator& comm, const at::Tensor& grad, int tag) {
  const int C = comm.size();
  // (..., C S_local, D) -> (C, ..., S_local, D): block r holds rank r's tokens.
  const at::Tensor blocks = at::stack(grad.chunk(C, -2), 0).contiguous();
  at::Tensor mine = at::empty(blocks[0].sizes(), blocks.options());
  at::Tensor out = mine.view({-1});
  collectives::reduce_scatter(comm, blocks.view({-1}), out, collectives::ReduceOp::kSum,
                              collectives::Algorithm::kRing, tag);
  return mine;
}

struct GatherSequence : torch::autograd::Function<GatherSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, comm::Communicator* comm, int64_t tag) {
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(comm);
    ctx->saved_data["tag"] = tag;
    return gather(*comm, x, static_cast<int>(tag));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto& comm = *reinterpret_cast<comm::Communicator*>(ctx->saved_data["comm"].toInt());
    return {scatter_sum(comm, grads[0], static_cast<int>(ctx->saved_data["tag"].toInt())), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor gather_sequence(comm::Communicator& comm, const at::Tensor& x, int tag) {
  if (!x.requires_grad()) return gather(comm, x, tag);
  return GatherSequence::apply(x, &comm, static_cast<int64_t>(tag));
}

at::Tensor gather_positions(comm::Communicator& comm, const at::Tensor& positions, int tag) {
  return gather_sequence(comm, positions.to(comm.device(), at::kLong).unsqueeze(-1), tag).squeeze(-1).cpu();
}

BlockResult all_gather_attention(comm::Communicator& comm, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, double scale, const at::Tensor& positions, bool causal,
                                 int tag) {
  const at::Tensor all_k = gather_sequence(comm, k, tag), all_v = gather_sequence(comm, v, tag);
  if (!causal) return block_attention(q, all_k, all_v, scale);
  return block_attention(q, all_k, all_v, scale, positions.cpu().to(at::kLong), gather_positions(comm, positions, tag));
}

BlockResult naive_attention(comm::Communicator& comm, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale, const at::Tensor& positions, bool causal, int tag) {
  const at::Tensor all_q = gather_sequence(comm, q, tag), all_k = gather_sequence(comm, k, tag);
  const at::Tensor all_v = gather_sequence(comm, v, tag), all_pos = gather_positions(comm, positions, tag);
  const BlockResult whole = causal ? block_attention(all_q, all_k, all_v, scale, all_pos, all_pos)
                                   : block_attention(all_q, all_k, all_v, scale);
  // My rows: where my tokens sit in the gathered order, rank after rank.
  const int64_t local = q.size(-2);
  const at::Tensor rows = at::arange(comm.rank() * local, (comm.rank() + 1) * local, at::kLong).to(whole.out.device());
  return {whole.out.index_select(-2, rows), whole.lse.index_select(-1, rows)};
}

}  // namespace distlab::context_parallel
