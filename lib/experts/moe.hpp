// A mixture-of-experts feed-forward: a router sends each token to k of E
// experts, and the token's output is their outputs weighted by the router.
//
// Two ways to hold the experts, side by side:
//
//   naive            every rank holds all E experts and runs its own
//                    tokens' assignments (moe_local): no communication;
//   expert parallel  an expert group of G ranks, rank q holding experts
//                    [q E/G, (q+1) E/G) (moe_parallel):
//                      1. route my tokens; drop what exceeds the capacity
//                         (dispatch.hpp); sort the kept rows by expert
//                      2. all-to-all of the counts: what each rank sends me
//                         for each of my experts
//                      3. all-to-all-v of the rows to their experts' ranks
//                      4. my experts on the rows that came (grouped by expert)
//                      5. all-to-all-v back (the counts swapped)
//                      6. each token's rows times its weights, summed
//                    The backward goes through the same exchanges reversed
//                    (exchange.hpp).
//
// Gradients. With the expert group inside the data-parallel dimension (as
// torchtitan and DeepSpeed lay it out: the experts borrow ranks from it),
// an expert's gradient on its rank already holds the sum over the group's
// tokens: the backward's all-to-all brought every rank's share home. The
// gradient of the job's mean loss is that sum over every rank's tokens
// divided by the D data-parallel ranks (each rank's loss a mean of its
// own tokens). So DistLab sums an expert's gradient over the ranks that
// hold a copy of it (one per expert group: D / G of them) and divides by D
// (average_expert_gradients). nanotron writes the same as "scale by 1/ep",
// then averages over the copies: (1/G) * (1/(D/G)) = 1/D. The router and
// everything outside the experts is replicated: DDP's average over D as
// for any other parameter.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "experts/dispatch.hpp"
#include "experts/expert_mlps.hpp"
#include "experts/router.hpp"

namespace distlab::experts {

struct MoeOptions {
  int64_t experts = 4;
  int64_t top_k = 1;
  double capacity_factor = 0;  // <= 0: dropless
  bool pad = false;            // pad each expert's rows to the capacity (fixed shapes)
  bool normalize = false;      // top-k weights divided by their sum
};

// What one forward did on this rank, for printing and the visualizer.
struct MoeStats {
  std::vector<int64_t> kept, dropped;  // per expert: this rank's assignments kept and dropped
  int64_t capacity = -1;
  std::vector<int64_t> sent_rows, received_rows;  // expert parallel: rows per peer, one way
  // The forward's phases on this rank, in seconds: dispatch (the plan, the
  // rows sorted by expert and, expert parallel, the counts' and the rows'
  // exchanges), the experts' work, combine (the rows' way back and the
  // weighted sum). An exchange's time includes waiting for the slowest peer.
  // Expert parallel, each phase is also an event on the group's trace as it
  // ends ("moe dispatch", "moe experts", "moe combine"; category "moe"),
  // these seconds its length.
  double dispatch_s = 0, experts_s = 0, combine_s = 0;
};

// The naive version: `experts` holds all E.
at::Tensor moe_local(const at::Tensor& x, const Routing& routing, ExpertMlpsImpl& experts, const MoeOptions& options,
                     MoeStats* stats = nullptr);
// Expert parallel over `group` (G ranks; E % G == 0): `mine` holds experts
// [rank E/G, (rank+1) E/G). Every rank of the group calls it (tags tag, tag + 1).
at::Tensor moe_parallel(comm::Communicator& group, const at::Tensor& x, const Routing& routing, ExpertMlpsImpl& mine,
                        const MoeOptions& options, MoeStats* stats = nullptr, int tag = 0);

// Throws std::invalid_argument naming E and G when E % G != 0.
int64_t experts_per_rank(int64_t experts, int group_size);

// The experts' gradients summed over `copies` (the ranks holding the same
// experts: one per expert group) and divided by `data_parallel` (see above).
void average_expert_gradients(comm::Communicator& copies, ExpertMlpsImpl& mine, int data_parallel);
void average_expert_gradients(comm::Communicator& copies, const std::vector<at::Tensor>& experts, int data_parallel);

// The layer: router and experts, naive (group null or one rank) or expert
// parallel. x (..., d) -> (..., d). The auxiliary losses of the last
// forward, times their coefficients, wait in aux_loss(); after
// set_aux_scale(s > 0) forward() also joins them to its output's backward,
// times s (aux_loss.hpp): a model need not collect them.
class MoeLayerImpl : public torch::nn::Module {
 public:
  // `whole`: all E experts, the same on every rank (this rank keeps its
  // slice under expert parallelism).
  MoeLayerImpl(Router router, const ExpertMlps& whole, MoeOptions options, comm::Communicator* group = nullptr,
               double balance_coefficient = 0.01, double z_coefficient = 0.001);
  at::Tensor forward(const at::Tensor& x);

  // Spreads the experts over `group` (kept whole so far, the same on every
  // rank): this rank keeps its slice [rank E/G, (rank+1) E/G) and forward()
  // runs expert parallel over the group from now on. Throws
  // std::invalid_argument when E % G != 0.
  void spread_over(comm::Communicator& group);

  at::Tensor aux_loss() const { return aux_loss_; }
  void set_aux_scale(double scale) { aux_scale_ = scale; }
  const MoeStats& last_stats() const { return stats_; }
  // The kept and dropped assignments of every training forward since the
  // last call (a step's microbatches), and the capacity; then starts afresh.
  MoeStats take_step_counts();
  bool parallel() const { return group_ != nullptr && group_->size() > 1; }

  Router router{nullptr};
  ExpertMlps experts{nullptr};  // this rank's

 private:
  MoeOptions options_;
  comm::Communicator* group_;
  double balance_coefficient_, z_coefficient_;
  double aux_scale_ = 0;  // 0: aux_loss() only
  at::Tensor aux_loss_;
  MoeStats stats_, step_counts_;
};
TORCH_MODULE(MoeLayer);

}  // namespace distlab::experts
