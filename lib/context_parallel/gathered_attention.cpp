#include "context_parallel/gathered_attention.hpp"

#include <ATen/ATen.h>

#include <vector>

#include "collectives/collectives.hpp"

namespace distlab::context_parallel {

at::Tensor gather_sequence(comm::Communicator& comm, const at::Tensor& x, int tag) {
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
