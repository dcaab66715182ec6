#include "context_parallel/ring_attention.hpp"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace distlab::context_parallel {
namespace {

// One hop round the ring: posts the receives of tensors like `held` from
// `previous` and the sends of `held` to `next` (tags tag, tag + 1, ...),
// adding the work to `pending`; returns what will have arrived once it is
// waited for. `held` must stay untouched until then (reading is fine).
std::vector<at::Tensor> pass_on(comm::Communicator& comm, const std::vector<at::Tensor>& held, int next,
                                int previous, int tag, std::vector<comm::WorkPtr>& pending) {
  std::vector<at::Tensor> arriving;
  for (size_t i = 0; i < held.size(); ++i) {
    arriving.push_back(at::empty_like(held[i]));
    pending.push_back(comm.irecv(arriving.back(), previous, tag + static_cast<int>(i)));
  }
  for (size_t i = 0; i < held.size(); ++i) pending.push_back(comm.isend(held[i], next, tag + static_cast<int>(i)));
  return arriving;
}

}  // namespace

at::Tensor positions_of(Layout layout, int64_t length, int ranks, int rank) {
  const int64_t chunk = chunk_length(layout, ranks, length);
  std::vector<at::Tensor> pieces;
  for (int c : chunks_of(layout, ranks, rank)) pieces.push_back(at::arange(c * chunk, (c + 1) * chunk, at::kLong));
  return at::cat(pieces);
}

BlockResult ring_attention(comm::Communicator& comm, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           double scale, const at::Tensor& positions, bool causal, int tag, RingWork* work) {
  const int C = comm.size(), me = comm.rank();
  const int next = (me + 1) % C, previous = (me + C - 1) % C;
  at::Tensor k_held = k.contiguous(), v_held = v.contiguous();
  at::Tensor pos_held = positions.to(comm.device(), at::kLong).contiguous();
  // The causal rule reads positions on the CPU; mine are the same every step.
  const at::Tensor q_pos = causal ? pos_held.cpu() : at::Tensor();
  BlockResult acc;
  for (int s = 0; s < C; ++s) {
    // The next block's transfer, posted before this block's compute.
    std::vector<comm::WorkPtr> pending;
    std::vector<at::Tensor> arriving;
    if (s + 1 < C) arriving = pass_on(comm, {k_held, v_held, pos_held}, next, previous, tag, pending);
    const at::Tensor k_pos = causal ? pos_held.cpu() : at::Tensor();
    merge_into(acc, block_attention(q, k_held, v_held, scale, q_pos, k_pos));
    if (work != nullptr) {
      const int64_t pairs = q.size(-2) * k_held.size(-2);
      work->pairs.push_back(pairs);
      work->computed.push_back(causal ? (k_pos.unsqueeze(0) <= q_pos.unsqueeze(1)).sum().item<int64_t>() : pairs);
    }
    for (auto& w : pending) w->wait();
    if (s + 1 < C) {
      k_held = arriving[0];
      v_held = arriving[1];
      pos_held = arriving[2];
    }
  }
  return acc;
}

RingGradients ring_attention_backward(comm::Communicator& comm, const at::Tensor& q, const at::Tensor& k,
                                      const at::Tensor& v, double scale, const at::Tensor& positions, bool causal,
                                      const BlockResult& forward, const at::Tensor& dout, int tag) {
  const int C = comm.size(), me = comm.rank();
  const int next = (me + 1) % C, previous = (me + C - 1) % C;
  const at::Tensor qf = q.to(at::kFloat), doutf = dout.to(at::kFloat);
  const at::Tensor lse = forward.lse.to(at::kFloat);
  const at::Tensor D = (doutf * forward.out.to(at::kFloat)).sum(-1, /*keepdim=*/true);
  const at::Tensor q_pos = causal ? positions.to(at::kLong).cpu() : at::Tensor();
  // What travels: the block, its positions and its gradients so far.
  at::Tensor k_held = k.to(at::kFloat).contiguous(), v_held = v.to(at::kFloat).contiguous();
  at::Tensor pos_held = positions.to(comm.device(), at::kLong).contiguous();
  at::Tensor dk_held = at::zeros_like(k_held), dv_held = at::zeros_like(v_held);
  at::Tensor dq = at::zeros_like(qf);
  for (int s = 0; s < C; ++s) {
    // The next block's K, V and positions, posted before this block's
    // compute (which only reads them); its gradients go on after it.
    std::vector<comm::WorkPtr> pending;
    std::vector<at::Tensor> block_in;
    if (s + 1 < C) block_in = pass_on(comm, {k_held, v_held, pos_held}, next, previous, tag, pending);
    const at::Tensor k_pos = causal ? pos_held.cpu() : at::Tensor();
    // This block's share of each row's softmax (0 in rows that see no key).
    const at::Tensor P = attention_probabilities(attention_scores(qf, k_held, scale, q_pos, k_pos), lse);
    dv_held = dv_held + at::matmul(P.transpose(-2, -1), doutf);
    const at::Tensor dS = P * (at::matmul(doutf, v_held.transpose(-2, -1)) - D);
    dq = dq + at::matmul(dS, k_held) * scale;
    dk_held = dk_held + at::matmul(dS.transpose(-2, -1), qf) * scale;
    if (C == 1) break;
    // The gradients to r + 1; after the last step this hop brings each
    // block's home.
    const std::vector<at::Tensor> grads_in = pass_on(comm, {dk_held, dv_held}, next, previous, tag + 3, pending);
    for (auto& w : pending) w->wait();
    if (s + 1 < C) {
      k_held = block_in[0];
      v_held = block_in[1];
      pos_held = block_in[2];
    }
    dk_held = grads_in[0];
    dv_held = grads_in[1];
  }
  return {dq, dk_held, dv_held};
}

}  // namespace distlab::context_parallel
