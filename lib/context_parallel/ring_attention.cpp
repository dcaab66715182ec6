#include "context_parallel/ring_attention.hpp"

#include <ATen/ATen.h>

#include <chrono>
#include <limits>
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

// Rows [start, start + length) of a block, holding consecutive positions
// first .. last: one run for a contiguous chunk, two for zigzag's pair.
struct Run {
  int64_t start = 0, length = 0, first = 0, last = 0;
};

std::vector<Run> runs_of(const at::Tensor& positions, int64_t rows) {
  if (!positions.defined()) return {{0, rows, 0, 0}};  // not causal: one run, every pair visible
  const at::Tensor p = positions.contiguous();
  const int64_t* d = p.data_ptr<int64_t>();
  std::vector<Run> runs;
  for (int64_t i = 0; i < rows; ++i) {
    if (runs.empty() || d[i] != runs.back().last + 1) runs.push_back({i, 0, d[i], d[i]});
    ++runs.back().length;
    runs.back().last = d[i];
  }
  return runs;
}

// Under a causal mask a query run against a key run is skipped (every key
// after every query), full (every key before or at every query: no mask
// needed) or diagonal (the mask cuts it). Without a mask, full.
Cover cover_of(const Run& q, const Run& k, bool causal) {
  if (!causal || k.last <= q.first) return Cover::kFull;
  return k.first > q.last ? Cover::kSkipped : Cover::kDiagonal;
}

// Each (query run, key run) piece of a block that is not skipped: its rows
// of q, k and v, and the positions when the mask cuts it.
template <typename Body>
void for_each_piece(const at::Tensor& q_pos, const at::Tensor& k_pos, int64_t q_rows, int64_t k_rows, bool causal,
                    Body body) {
  for (const Run& qr : runs_of(q_pos, q_rows))
    for (const Run& kr : runs_of(k_pos, k_rows)) {
      const Cover cover = cover_of(qr, kr, causal);
      if (cover == Cover::kSkipped) continue;
      const bool masked = cover == Cover::kDiagonal;
      body(qr, kr, masked ? q_pos.narrow(0, qr.start, qr.length) : at::Tensor(),
           masked ? k_pos.narrow(0, kr.start, kr.length) : at::Tensor());
    }
}

// This rank's queries against one held block, computing only the pieces
// the causal mask leaves: a skipped piece costs nothing, a full one needs
// no mask. What block_attention gives on the whole block, merged piece by
// piece (rows that see no key: out 0, lse -inf).
BlockResult attend_held(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                        const at::Tensor& q_pos, const at::Tensor& k_pos, bool causal) {
  if (!causal) return block_attention(q, k, v, scale);
  const std::vector<Run> q_runs = runs_of(q_pos, q.size(-2));
  std::vector<BlockResult> rows(q_runs.size());
  for_each_piece(q_pos, k_pos, q.size(-2), k.size(-2), causal,
                 [&](const Run& qr, const Run& kr, const at::Tensor& qp, const at::Tensor& kp) {
                   size_t index = 0;
                   while (q_runs[index].start != qr.start) ++index;
                   merge_into(rows[index], block_attention(q.narrow(-2, qr.start, qr.length),
                                                           k.narrow(-2, kr.start, kr.length),
                                                           v.narrow(-2, kr.start, kr.length), scale, qp, kp));
                 });
  std::vector<at::Tensor> outs, lses;
  for (size_t i = 0; i < q_runs.size(); ++i) {
    if (!rows[i].out.defined()) {  // nothing visible to these queries in this block
      std::vector<int64_t> shape(q.sizes().begin(), q.sizes().end());
      shape[shape.size() - 2] = q_runs[i].length;
      shape.back() = v.size(-1);
      rows[i].out = at::zeros(shape, q.options().dtype(at::kFloat));
      shape.pop_back();
      rows[i].lse = at::full(shape, -std::numeric_limits<float>::infinity(), q.options().dtype(at::kFloat));
    }
    outs.push_back(rows[i].out);
    lses.push_back(rows[i].lse);
  }
  return {at::cat(outs, -2), at::cat(lses, -1)};
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
    const auto started = std::chrono::steady_clock::now();
    merge_into(acc, attend_held(q, k_held, v_held, scale, q_pos, k_pos, causal));
    if (work != nullptr)
      work->compute_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
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
    // This block's share of each row's softmax (0 in rows that see no
    // key), piece by piece as the forward computed it: skipped pieces
    // add nothing.
    // (dk_held and dv_held arrived in buffers of our own: added into in place)
    for_each_piece(q_pos, k_pos, qf.size(-2), k_held.size(-2), causal,
                   [&](const Run& qr, const Run& kr, const at::Tensor& qp, const at::Tensor& kp) {
                     const at::Tensor qs = qf.narrow(-2, qr.start, qr.length);
                     const at::Tensor ks = k_held.narrow(-2, kr.start, kr.length);
                     const at::Tensor vs = v_held.narrow(-2, kr.start, kr.length);
                     const at::Tensor ds_out = doutf.narrow(-2, qr.start, qr.length);
                     const at::Tensor P = attention_probabilities(attention_scores(qs, ks, scale, qp, kp),
                                                                  lse.narrow(-1, qr.start, qr.length));
                     dv_held.narrow(-2, kr.start, kr.length).add_(at::matmul(P.transpose(-2, -1), ds_out));
                     const at::Tensor dS =
                         P * (at::matmul(ds_out, vs.transpose(-2, -1)) - D.narrow(-2, qr.start, qr.length));
                     dq.narrow(-2, qr.start, qr.length).add_(at::matmul(dS, ks) * scale);
                     dk_held.narrow(-2, kr.start, kr.length).add_(at::matmul(dS.transpose(-2, -1), qs) * scale);
                   });
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
