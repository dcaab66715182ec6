#include "train/data_parallel.hpp"

#include <torch/nn/modules/container/parameterlist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "experts/moe.hpp"
#include "models/model_unit.hpp"
#include "zero/optimizer_factory.hpp"
#include "zero/shard_segments.hpp"
#include "zero/zero1.hpp"
#include "zero/zero2.hpp"
#include "zero/zero3.hpp"

namespace distlab::train {

namespace {

// The gradients the norm counts: those that exist.
std::vector<at::Tensor> gradients_of(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : tensors)
    if (t.grad().defined()) out.push_back(t.grad());
  return out;
}

void set_sgd_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
}

// DDP: the stage whole on every replica; the last backward all-reduces.
class DdpStage final : public DataParallelStage {
 public:
  DdpStage(comm::Communicator& replicas, RankStage& stage, double lr, comm::Communicator* expert_copies)
      : stage_(stage), replicas_(replicas.size()), expert_copies_(expert_copies) {
    ddp::DdpOptions options;
    options.broadcast_buffers = false;  // the only buffer is the constant positional table
    options.ignored = stage.names_placed(Placement::kSpread);  // spread experts: averaged in end_step()
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(replicas, stage.module(), options);
    optimizer_ = std::make_unique<torch::optim::SGD>(stage.parameters(), torch::optim::SGDOptions(lr));
  }

  pipeline::StageModule stage() override { return stage_.stage(); }
  void zero_grad() override { compat::zero_grad(*optimizer_); }
  void begin_step() override {
    // The flag is read when the reducer is prepared: once here for every
    // microbatch but the last (no_sync), once more before the last backward.
    no_sync_.emplace(ddp_->no_sync());
    ddp_->prepare_forward();
  }
  void before_last_backward() override {
    no_sync_.reset();          // synchronization back on ...
    ddp_->prepare_forward();   // ... and the reducer armed for this backward
  }
  void end_step() override {
    no_sync_.reset();
    ddp_->reducer().finalize();  // a no-op when the engine's callback already waited
    // Spread experts: each one's gradient holds its expert group's tokens
    // already (the all-to-all brought them home); summed over the copies, / R.
    if (expert_copies_ != nullptr)
      experts::average_expert_gradients(*expert_copies_, stage_.parameters_placed(Placement::kSpread), replicas_);
  }
  std::vector<NormShare> norm_shares() override {
    // One share per placement this stage has: replicated tensors count
    // once, cut pieces add over the tensor group, spread experts over the
    // expert group (RankStage::group_of). Whether a placement is present is
    // the same on every rank of its group.
    const std::vector<PlacedParameter> held = stage_.placed_parameters();  // once a step, not once a placement
    std::vector<NormShare> shares;
    for (const Placement placement : kPlacements) {
      const std::vector<at::Tensor> placed = tensors_placed(held, placement);
      if (placed.empty() && placement != Placement::kReplicated) continue;
      comm::Communicator* over = stage_.group_of(placement);
      shares.push_back({gradients_of(placed), over != nullptr ? std::vector<comm::Communicator*>{over}
                                                              : std::vector<comm::Communicator*>{}});
    }
    return shares;
  }
  void optimizer_step() override { optimizer_->step(); }
  void set_lr(double lr) override { set_sgd_lr(*optimizer_, lr); }
  DataParallelStats stats() override {
    DataParallelStats s{"DDP", 0, ddp_->stats()};
    s.synced_steps = s.ddp.synced_steps;
    return s;
  }

 private:
  RankStage& stage_;
  int replicas_;
  comm::Communicator* expert_copies_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  std::unique_ptr<torch::optim::SGD> optimizer_;
  std::optional<ddp::DistributedDataParallel::NoSync> no_sync_;
};

// The tensors' storages' owners, to tell a parameter among others.
std::set<const c10::TensorImpl*> impls_of(const std::vector<at::Tensor>& tensors) {
  std::set<const c10::TensorImpl*> out;
  for (const at::Tensor& t : tensors) out.insert(t.unsafeGetTensorImpl());
  return out;
}

// The parameters of `units` that are (or are not) spread experts, as one
// module for ZeRO-1/2 to shard: the same tensors, not copies.
torch::nn::ParameterList parameters_of(const torch::nn::Sequential& units, const std::set<const c10::TensorImpl*>& spread,
                                       bool spread_ones) {
  torch::nn::ParameterList list;
  for (const at::Tensor& p : units->parameters())
    if (spread.count(p.unsafeGetTensorImpl()) == static_cast<size_t>(spread_ones)) list->append(p);
  return list;
}

// The units as ZeRO-3 shards them with the spread experts left out: each
// unit the modules of the original that hold parameters of their own, but
// those holding spread ones, registered by their paths ('.' as '_'); its
// forward the original's. The experts stay whole on their ranks (each holds
// E/N of them already).
torch::nn::Sequential units_without(const torch::nn::Sequential& units, const std::set<const c10::TensorImpl*>& spread) {
  torch::nn::Sequential out;
  for (const auto& unit : units->named_children()) {
    models::ModelUnitImpl::Parts parts;
    for (const auto& item : unit.value()->named_modules("", /*include_self=*/false)) {
      const std::vector<at::Tensor> own = item.value()->parameters(/*recurse=*/false);
      size_t spread_ones = 0;
      for (const at::Tensor& p : own) spread_ones += spread.count(p.unsafeGetTensorImpl());
      if (own.empty() || spread_ones == own.size()) continue;
      if (spread_ones > 0)
        throw std::logic_error("ZeRO-3: module '" + item.key() + "' holds spread experts and other parameters");
      std::string name = item.key();
      std::replace(name.begin(), name.end(), '.', '_');
      parts.emplace_back(name, item.value());
    }
    const auto whole = std::dynamic_pointer_cast<models::ModelUnitImpl>(unit.value());
    out->push_back(unit.key(), torch::nn::AnyModule(models::ModelUnit(parts, [whole](const at::Tensor& x) {
                     return whole->forward(x);
                   })));
  }
  return out;
}

// ZeRO-3's parameters gathered whole until the scope ends.
class Gathered final : public WholeScope {
 public:
  explicit Gathered(zero::Zero3::WholeParameters parameters) : parameters_(std::move(parameters)) {}
  bool temporary() const override { return true; }

 private:
  zero::Zero3::WholeParameters parameters_;
};

// ZeRO-k: each replica owns 1/R of the stage's optimizer state (and its
// gradients, k >= 2; its parameters, k = 3). Z is zero::Zero1, Zero2 or Zero3.
// A stage cut across a tensor group: each tensor rank's replica group
// shards that rank's pieces and replicated parameters alike.
// Experts spread over an expert group: they differ from replica to
// replica, so a second ZeRO shards them over the ranks holding the same
// experts (their copies), and the replicas' ZeRO-k the rest: ZeRO-k for
// k = 1, 2; ZeRO-2 under ZeRO-3, whose units leave the experts out (their
// parameters stay whole: each rank holds E/N of them already). Each
// expert's gradient already holds its expert group's tokens (the
// all-to-all brought them home), so the copies' average is the job's
// average times N (R / copies): the expert shard's gradient is scaled by
// 1 / N after its reduce-scatter, as experts::average_expert_gradients
// divides the copies' sum by R.
template <class Z>
class ZeroStage final : public DataParallelStage {
  static constexpr int kStage = std::is_same_v<Z, zero::Zero1> ? 1 : std::is_same_v<Z, zero::Zero2> ? 2 : 3;
  using ExpertZ = std::conditional_t<kStage == 3, zero::Zero2, Z>;

 public:
  ZeroStage(comm::Communicator& replicas, comm::Communicator& tensor, RankStage& stage, double lr,
            comm::Communicator* expert_copies)
      : tensor_(tensor), units_(stage.units()) {
    const std::set<const c10::TensorImpl*> spread = impls_of(stage.parameters_placed(Placement::kSpread));
    if (expert_copies != nullptr) {
      spread_ = parameters_of(units_, spread, true);
      experts_ = std::make_unique<ExpertZ>(*expert_copies, *spread_, sgd(lr));
      expert_scale_ = double(expert_copies->size()) / replicas.size();
      expert_group_ = stage.group_of(Placement::kSpread);
    }
    if constexpr (kStage == 3) {
      zero_ = std::make_unique<Z>(replicas, experts_ ? units_without(units_, spread) : units_, sgd(lr));
    } else if (experts_) {
      dense_ = parameters_of(units_, spread, false);
      zero_ = std::make_unique<Z>(replicas, *dense_, sgd(lr));
    } else {
      zero_ = std::make_unique<Z>(replicas, *units_, sgd(lr));
    }
    if (tensor_.size() == 1) return;
    // Cut across a tensor group, the shard's segments of cut matrices add
    // over the replicas and the tensor group; those of replicated
    // parameters (the same on every tensor rank) over the replicas only.
    // Which is which is fixed by the layout: sorted once, here.
    const std::set<const c10::TensorImpl*> cut = impls_of(stage.parameters_placed(Placement::kCut));
    const zero::ShardedOptimizer& sharded = zero_->sharded();
    for (const zero::Segment& s : zero::shard_segments(sharded.layout(), sharded.comm().rank()))
      (cut.count(sharded.params()[static_cast<size_t>(s.param)].unsafeGetTensorImpl()) ? cut_segments_
                                                                                       : replicated_segments_)
          .push_back(s);
  }

  pipeline::StageModule stage() override {
    // ZeRO made the parameters views into its flat buffers (set_data): the
    // same tensors, so the executor's list of them still holds.
    pipeline::StageModule stage = pipeline::stage_of(units_);
    if constexpr (kStage == 3) stage.forward = [z = zero_.get()](const at::Tensor& x) { return z->forward(x); };
    return stage;
  }
  void zero_grad() override {
    each([](auto& z) { z.zero_grad(); });
  }
  void begin_step() override {
    if constexpr (kStage >= 2)  // lifted before the last backward
      each([this](auto& z) { no_sync_.push_back(z.no_sync()); });
  }
  void before_last_backward() override { no_sync_.clear(); }  // its hooks reduce-scatter the summed .grad
  void end_step() override {
    no_sync_.clear();
    if constexpr (kStage == 1) {  // the m backwards summed in .grad; now one reduce-scatter of the sum
      each([](auto& z) { z.reduce_gradients(); });
      ++reductions_;
    }
    if (experts_) {
      at::NoGradGuard no_grad;
      for (const at::Tensor& chunk : experts_->sharded().shard())
        if (chunk.grad().defined()) chunk.grad().mul_(expert_scale_);
    }
  }
  std::vector<NormShare> norm_shares() override {
    // This rank's chunks of the stage: their squares add over the replicas.
    const zero::ShardedOptimizer& sharded = zero_->sharded();
    std::vector<NormShare> shares;
    if (tensor_.size() == 1) {
      shares.push_back({gradients_of(sharded.shard()), {&sharded.comm()}});
    } else {
      const auto gradients = [&](const std::vector<zero::Segment>& segments) {
        std::vector<at::Tensor> out;
        for (const zero::Segment& s : segments)
          out.push_back(sharded.shard()[static_cast<size_t>(s.bucket)].grad().narrow(0, s.chunk_offset, s.length));
        return out;
      };
      shares.push_back({gradients(replicated_segments_), {&sharded.comm()}});
      shares.push_back({gradients(cut_segments_), {&sharded.comm(), &tensor_}});
    }
    // The experts' chunks add over their copies, then over the expert group (the other experts).
    if (experts_) shares.push_back({gradients_of(experts_->sharded().shard()), {&experts_->sharded().comm(), expert_group_}});
    return shares;
  }
  void optimizer_step() override {  // the shard; ZeRO-1/2 then all-gather
    each([](auto& z) { z.step(); });
  }
  void set_lr(double lr) override {
    each([lr](auto& z) { set_sgd_lr(z.sharded().optimizer(), lr); });
  }
  std::unique_ptr<WholeScope> whole() override {
    if constexpr (kStage == 3) return std::make_unique<Gathered>(zero_->whole_parameters());
    return std::make_unique<WholeScope>();
  }
  DataParallelStats stats() override {
    DataParallelStats s{"ZeRO-" + std::to_string(kStage), reductions_, {}};
    if constexpr (kStage >= 2) s.synced_steps = zero_->stats().synced_steps;
    return s;
  }

 private:
  static zero::OptimizerFactory sgd(double lr) { return zero::sgd(torch::optim::SGDOptions(lr)); }
  template <class F>
  void each(F f) {  // the replicas' ZeRO, then the experts'
    f(*zero_);
    if (experts_) f(*experts_);
  }

  comm::Communicator& tensor_;
  torch::nn::Sequential units_;
  torch::nn::ParameterList dense_{nullptr}, spread_{nullptr};  // experts spread: the two halves ZeRO shards
  std::unique_ptr<Z> zero_;
  std::unique_ptr<ExpertZ> experts_;  // the spread experts' ZeRO, over their copies
  double expert_scale_ = 1;     // 1 / N
  comm::Communicator* expert_group_ = nullptr;
  std::vector<zero::Segment> replicated_segments_, cut_segments_;  // of a cut stage's shard
  std::vector<ddp::NoSyncGuard> no_sync_;  // ZeRO-2 and ZeRO-3
  int64_t reductions_ = 0;                 // ZeRO-1's reduce-scatter rounds
};

}  // namespace

std::unique_ptr<DataParallelStage> make_data_parallel(int zero, comm::Communicator& replicas,
                                                      comm::Communicator& tensor, RankStage& stage, double lr,
                                                      comm::Communicator* expert_copies) {
  if (zero == 0) return std::make_unique<DdpStage>(replicas, stage, lr, expert_copies);
  // The plan refuses this with the user's words (dimensions.cpp); here it is a precondition.
  if (zero == 1) return std::make_unique<ZeroStage<zero::Zero1>>(replicas, tensor, stage, lr, expert_copies);
  if (zero == 2) return std::make_unique<ZeroStage<zero::Zero2>>(replicas, tensor, stage, lr, expert_copies);
  if (zero == 3) return std::make_unique<ZeroStage<zero::Zero3>>(replicas, tensor, stage, lr, expert_copies);
  throw std::invalid_argument("make_data_parallel: strategy " + std::to_string(zero) + " is not 0 (DDP) or 1-3 (ZeRO-k)");
}

}  // namespace distlab::train
