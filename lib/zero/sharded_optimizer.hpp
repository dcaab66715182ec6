// What ZeRO's three stages share: this rank's shard of the parameters, an
// ordinary LibTorch optimizer stepping it, the gradient norm over all
// shards, and the all-gather that gives every rank the whole update (after
// each step for stages 1 and 2; ZeRO-3 steps the shard alone, step_shard(),
// and gathers a unit only when its forward or backward needs it).
//
//   shard        (shard_numel,) leaf tensor: this rank's chunks of every
//                bucket of parameters (shard_layout.hpp)
//   shard.grad   (shard_numel,) this rank's chunks of the averaged gradient.
//                Zero2's and Zero3's reduce-scatters add into a .grad of the
//                chunks' own; Zero1's gradient buffers (use_gradient_buffers)
//                hold the whole gradient, and my chunk's .grad is its range
//                of them, which the reduce-scatter fills in place
//   step()       optimizer.step() on the shard, then bucket by bucket: put
//                my chunk in a flat buffer, all-gather it, copy the buffer
//                back into the parameters
//
// The optimizer sees only the shard, so its state is 1/p of DDP's
// (optimizer_factory.hpp says why that is exact).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/plan.hpp"
#include "comm/communicator.hpp"
#include "ddp/bucket_plan.hpp"
#include "zero/memory.hpp"
#include "zero/optimizer_factory.hpp"
#include "zero/shard_layout.hpp"

namespace distlab::zero {

inline constexpr const char* kLaneZero = "zero";

struct ZeroOptions {
  // Buckets as DDP's (ddp/bucket_plan.hpp); <= 0: one bucket per parameter.
  int64_t bucket_cap_bytes = ddp::kDefaultBucketCapBytes;
  int64_t first_bucket_bytes = ddp::kDefaultFirstBucketBytes;
  // Every reduce-scatter and all-gather: kRing (the library's) or kNative.
  // The backends have no reduce-scatter or all-gather of their own, so
  // kNative stands in with an all-reduce of the whole bucket (collectives.hpp),
  // about twice the bytes of a ring reduce-scatter: the reference, not the fast path.
  collectives::Algorithm algorithm = collectives::Algorithm::kRing;
  int tag = 0;  // collective tag of the reduce-scatters and all-gathers (collectives/tags.hpp)
};

// What compute was doing when a bucket's collective was queued on the comm
// thread, as (arg, count), e.g. {"grads pending at submit", 7}: args of the
// collective's span. A trace then shows why the collective could overlap
// with compute (it was queued while compute still had work to do), not only
// that their times happened to overlap.
using SubmittedWhen = std::vector<std::pair<std::string, int64_t>>;

// Where the shard lives. ZeRO-1 and ZeRO-2 keep whole parameters: each
// bucket's parameters become views into one flat buffer, and my chunk of it
// is a view too, so stepping the chunk updates the parameters in place and
// the all-gather fills the rest; no copy is kept. ZeRO-3 frees the whole
// parameters between uses, so its shard owns its memory.
enum class ShardStorage { kViewsOfParameters, kOwn };

// How the trainable parameters (in registration order) become buckets.
using Packing = std::function<ddp::BucketPlan(const std::vector<ddp::ParamInfo>&)>;
// DDP's packing: buckets of options' sizes, in `order` (plan_by_size).
Packing pack_by_size(const ZeroOptions& options, BucketOrder order);

class ShardedOptimizer {
 public:
  // Every rank of `comm` calls it with the same model. Checks that the
  // ranks hold the same parameters (names, shapes, dtypes: an error names
  // the first that differs and the ranks), takes rank 0's parameters and
  // buffers, lays out the buckets and shards, and makes this rank's chunks
  // (views, or copies: ShardStorage). `stage`'s name ("ZeRO-1") starts
  // error messages and names the trace's spans and memory samples.
  ShardedOptimizer(comm::Communicator& comm, torch::nn::Module& module, const OptimizerFactory& make_optimizer,
                   ZeroOptions options, Stage stage, const Packing& packing, ShardStorage storage);

  comm::Communicator& comm() const { return comm_; }
  const ShardLayout& layout() const { return layout_; }
  const std::vector<at::Tensor>& params() const { return params_; }
  const std::vector<std::string>& names() const { return names_; }
  const ZeroOptions& options() const { return options_; }
  const std::string& who() const { return who_; }
  // This rank's parameters: its chunk of every bucket, (chunk count,) each,
  // in bucket order; the optimizer steps these.
  const std::vector<at::Tensor>& shard() const { return chunks_; }
  // The chunks' gradients one after the other (shard_numel,), a copy to
  // look at: zero after zero_shard_grad(), then what the reduce-scatters put there.
  at::Tensor shard_grad() const;
  void zero_shard_grad();
  at::TensorOptions tensor_options() const { return options_of_; }

  // torch.nn.utils.clip_grad_norm_ over the whole model: the global L2 norm
  // is one all-reduce of each shard's sum of squares; when it exceeds
  // max_norm, each rank scales its shard's gradient by max_norm / (norm + 1e-6)
  // (collectives/grad_norm.hpp, the library's one clip, with the shard as
  // the share summed over the group). Returns the norm before clipping,
  // the same on every rank.
  double clip_grad_norm(double max_norm);

  // Steps the shard, then all-gathers the parameters bucket by bucket.
  void step();
  // The two halves: ZeRO-3 steps the shard and gathers a unit only when
  // its forward needs it.
  void step_shard();
  void gather_parameters();
  // ZeRO-2 and ZeRO-3 call it before stepping: their reduce-scatters take
  // each .grad into the shard and undefine it, so a .grad still defined is a
  // no_sync micro-step's that no synchronized backward took (stepping would
  // silently drop it). Throws CommError naming the first such parameter.
  void refuse_unreduced_grads() const;
  // Bucket `bucket` whole into `flat` (bucket numel,): my chunk copied in
  // from the shard, the others' all-gathered; traced as `name`. Any thread
  // may call it (ZeRO-3's comm thread does), in the same order on every rank.
  void all_gather_bucket(int bucket, const at::Tensor& flat, const std::string& name,
                         const SubmittedWhen& submitted = {}) const;
  // Reduce-scatters bucket `bucket`'s gradient `flat` (bucket numel,),
  // each rank's already divided by p, and adds my chunk of the sum to the
  // shard's .grad; traced as `name`. Buckets' chunks are disjoint, so the
  // comm thread may do this while backward goes on. Same order on every rank.
  void reduce_scatter_bucket(int bucket, at::Tensor flat, const std::string& name,
                             const SubmittedWhen& submitted = {});

  // ZeRO-1's whole gradient, kept once: one flat (bucket numel,) buffer per
  // bucket, laid out as the parameters' buffer. Every parameter's .grad
  // becomes its slot of it (a tensor over the buffer's memory:
  // ddp/bucket_view.hpp), so backward accumulates straight into the buffer;
  // my chunk's .grad becomes the chunk's range of it, for good.
  void use_gradient_buffers();
  // (bucket numel,) per bucket after use_gradient_buffers(); empty before.
  const std::vector<at::Tensor>& gradient_buffers() const { return grad_buffers_; }
  // Zeroes the gradient buffers; every parameter's .grad is its slot again.
  void zero_gradient_buffers();
  // Bucket `bucket`'s gradient buffer averaged over the ranks, in place:
  // each .grad that is not its slot is put there first (undefined: the slot
  // is zeroed; replaced by user code: copied in, and .grad is the slot
  // again), the buffer is divided by p and reduce-scattered where it is.
  // My chunk of it, the shard's .grad, then holds the average; the rest holds
  // what the reduce-scatter left there (partial sums). Traced as `name`.
  void reduce_scatter_gradient_buffer(int bucket, const std::string& name);

  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  // The bytes this rank holds (memory.hpp): now, the model's parameters and
  // the shard (counted once where it is a view of them), their gradients
  // (counted once where they share ZeRO-1's gradient buffers), the
  // optimizer's state; at their most since peaks().reset() (or since it
  // was built), the communication buffers that come and go and the
  // activations.
  MemoryUse memory() const;
  // The passing bytes: ZeRO-2 and ZeRO-3 count their buffers here; the
  // caller may note the activations its forward kept.
  StepPeaks& peaks() const { return peaks_; }
  // What the ZeRO paper says this rank holds: accounting() of memory.hpp
  // for this stage, the model's parameter count, the ranks, the parameters'
  // element size and the optimizer's state bytes (OptimizerFactory).
  MemoryUse accounting() const;
  // memory() and accounting() as the trace's counter samples "memory ZeRO-2"
  // and "accounting ZeRO-2" on this rank (when tracing). step_shard()
  // records them before and after the step.
  void record_memory() const;
  int64_t steps() const { return steps_; }

  // work->wait(), its errors rethrown starting with `which` ("ZeRO-2 bucket 3 of 5").
  static void wait_naming(const comm::WorkPtr& work, const std::string& which);

 private:
  // A bucket's all-gather or reduce-scatter span: its name, bytes, stage, bucket, step, algorithm,
  // and what compute was doing when it was queued.
  void label_bucket_span(trace::Span& span, int bucket, const std::string& name, const at::Tensor& flat,
                         const SubmittedWhen& submitted = {}) const;
  // Parameter i's .grad becomes its slot of the gradient buffers.
  void point_grad_at_slot(size_t i);

  comm::Communicator& comm_;
  ZeroOptions options_;
  Stage stage_;
  std::string who_;
  int64_t state_bytes_per_parameter_ = 0;
  std::vector<std::string> names_;
  std::vector<at::Tensor> params_;
  ShardLayout layout_;
  at::TensorOptions options_of_;
  std::vector<at::Tensor> flats_;   // kViewsOfParameters: per bucket (numel,), the parameters are views into it
  std::vector<at::Tensor> chunks_;  // per bucket (chunk count,)
  std::vector<at::Tensor> grad_buffers_;  // use_gradient_buffers: per bucket (numel,), the whole gradient
  std::vector<at::Tensor> grad_slots_;    // use_gradient_buffers: per parameter (numel,), its range of them
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  int64_t steps_ = 0;
  mutable StepPeaks peaks_;
};

// Bucket `bucket` as one flat (numel,) buffer: the parameters' gradients
// times `scale` (an undefined .grad counts as zeros), or the parameters.
at::Tensor flat_gradients(const ShardLayout& layout, int bucket, const std::vector<at::Tensor>& params, double scale);
at::Tensor flat_parameters(const ShardLayout& layout, int bucket, const std::vector<at::Tensor>& params);

}  // namespace distlab::zero
