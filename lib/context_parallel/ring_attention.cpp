#include "context_parallel/ring_attention.hpp"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace distlab::context_parallel {

const char* to_string(Layout layout) { return layout == Layout::kZigzag ? "zigzag" : "contiguous"; }

at::Tensor positions_of(Layout layout, int64_t length, int ranks, int rank) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw std::invalid_argument("context parallelism: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  const int pieces = layout == Layout::kZigzag ? 2 * ranks : ranks;
  if (length % pieces != 0)
    throw std::invalid_argument(std::string("context parallelism, ") + to_string(layout) + ": a sequence of " +
                                std::to_string(length) + " tokens does not split into " + std::to_string(pieces) +
                                " equal chunks" + (layout == Layout::kZigzag ? " (2C for C ranks)" : "") +
                                "; choose a length that is a multiple of " + std::to_string(pieces));
  const int64_t chunk = length / pieces;
  if (layout == Layout::kContiguous) return at::arange(rank * chunk, (rank + 1) * chunk, at::kLong);
  return at::cat({at::arange(rank * chunk, (rank + 1) * chunk, at::kLong),
                  at::arange((pieces - 1 - rank) * chunk, (pieces - rank) * chunk, at::kLong)});
}

BlockResult ring_attention(comm::Communicator& comm, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           double scale, const at::Tensor& positions, bool causal, int tag, RingWork* work) {
  const int C = comm.size(), me = comm.rank();
  const int next = (me + 1) % C, previous = (me + C - 1) % C;
  at::Tensor k_held = k.contiguous(), v_held = v.contiguous();
  at::Tensor pos_held = positions.to(comm.device(), at::kLong).contiguous();
  const at::Tensor my_positions = pos_held;
  BlockResult acc;
  for (int s = 0; s < C; ++s) {
    // The next block's transfer, posted before this block's compute.
    std::vector<comm::WorkPtr> pending;
    at::Tensor k_next, v_next, pos_next;
    if (s + 1 < C) {
      k_next = at::empty_like(k_held);
      v_next = at::empty_like(v_held);
      pos_next = at::empty_like(pos_held);
      pending.push_back(comm.irecv(k_next, previous, tag));
      pending.push_back(comm.irecv(v_next, previous, tag + 1));
      pending.push_back(comm.irecv(pos_next, previous, tag + 2));
      pending.push_back(comm.isend(k_held, next, tag));
      pending.push_back(comm.isend(v_held, next, tag + 1));
      pending.push_back(comm.isend(pos_held, next, tag + 2));
    }
    const at::Tensor q_pos = causal ? my_positions.cpu() : at::Tensor();
    const at::Tensor k_pos = causal ? pos_held.cpu() : at::Tensor();
    merge_into(acc, block_attention(q, k_held, v_held, scale, q_pos, k_pos));
    if (work != nullptr) {
      const int64_t pairs = q.size(-2) * k_held.size(-2);
      work->pairs.push_back(pairs);
      work->computed.push_back(causal ? (k_pos.unsqueeze(0) <= q_pos.unsqueeze(1)).sum().item<int64_t>() : pairs);
    }
    for (auto& w : pending) w->wait();
    if (s + 1 < C) {
      k_held = k_next;
      v_held = v_next;
      pos_held = pos_next;
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
  const at::Tensor lse = forward.lse.to(at::kFloat).unsqueeze(-1);
  const at::Tensor D = (doutf * forward.out.to(at::kFloat)).sum(-1, /*keepdim=*/true);
  const at::Tensor my_positions = positions.to(at::kLong).cpu();
  // What travels: the block, its positions and its gradients so far.
  at::Tensor k_held = k.to(at::kFloat).contiguous(), v_held = v.to(at::kFloat).contiguous();
  at::Tensor pos_held = positions.to(comm.device(), at::kLong).contiguous();
  at::Tensor dk_held = at::zeros_like(k_held), dv_held = at::zeros_like(v_held);
  at::Tensor dq = at::zeros_like(qf);
  for (int s = 0; s < C; ++s) {
    at::Tensor scores = at::matmul(qf, k_held.transpose(-2, -1)) * scale;
    if (causal) {
      const at::Tensor later = pos_held.cpu().unsqueeze(0) > my_positions.unsqueeze(1);
      scores = scores.masked_fill(later.to(scores.device()), -std::numeric_limits<float>::infinity());
    }
    // Rows that see no key at all (lse -inf) contribute nothing.
    const at::Tensor P = at::where(at::isfinite(lse), at::exp(scores - lse), at::zeros_like(scores));
    dv_held = dv_held + at::matmul(P.transpose(-2, -1), doutf);
    const at::Tensor dS = P * (at::matmul(doutf, v_held.transpose(-2, -1)) - D);
    dq = dq + at::matmul(dS, k_held) * scale;
    dk_held = dk_held + at::matmul(dS.transpose(-2, -1), qf) * scale;
    if (C == 1) break;
    // On: the block and its gradients to r + 1; after the last step this
    // hop brings every block home.
    at::Tensor k_in = at::empty_like(k_held), v_in = at::empty_like(v_held), pos_in = at::empty_like(pos_held);
    at::Tensor dk_in = at::empty_like(dk_held), dv_in = at::empty_like(dv_held);
    std::vector<comm::WorkPtr> pending;
    const bool last = s + 1 == C;
    if (!last) {
      pending.push_back(comm.irecv(k_in, previous, tag));
      pending.push_back(comm.irecv(v_in, previous, tag + 1));
      pending.push_back(comm.irecv(pos_in, previous, tag + 2));
      pending.push_back(comm.isend(k_held, next, tag));
      pending.push_back(comm.isend(v_held, next, tag + 1));
      pending.push_back(comm.isend(pos_held, next, tag + 2));
    }
    pending.push_back(comm.irecv(dk_in, previous, tag + 3));
    pending.push_back(comm.irecv(dv_in, previous, tag + 4));
    pending.push_back(comm.isend(dk_held, next, tag + 3));
    pending.push_back(comm.isend(dv_held, next, tag + 4));
    for (auto& w : pending) w->wait();
    if (!last) {
      k_held = k_in;
      v_held = v_in;
      pos_held = pos_in;
    }
    dk_held = dk_in;
    dv_held = dv_in;
  }
  return {dq, dk_held, dv_held};
}

}  // namespace distlab::context_parallel
