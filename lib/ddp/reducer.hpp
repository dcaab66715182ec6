// The engine room of DistributedDataParallel: gradient hooks, buckets, the
// all-reduces started while backward runs, and the wait at its end.
//
// One step, as seen from here:
//   prepare_for_backward(sync)   before the forward (DDP calls it)
//   backward: each parameter's gradient accumulator fires a post hook once
//     the gradient is final in .grad (after accumulation, so the sum of
//     earlier no_sync steps is included). The hook copies the gradient,
//     divided by the world size, into its slot of the bucket; when a
//     bucket's last slot is filled, the bucket is launched: all-reduced
//     (sum) on the comm thread, strictly in bucket order, while backward
//     goes on computing earlier layers' gradients.
//   end of backward: a callback queued with the autograd engine waits for
//     every bucket and copies the averaged result back into .grad.
//
// .grad is a copy of the bucket by default, as in PyTorch: an ordinary
// tensor that the user and the optimizer may replace or keep. With
// gradient_as_bucket_view (PyTorch's option of that name) .grad is made to
// share the bucket's memory instead: backward then accumulates straight
// into the bucket, the hook only scales it in place, and nothing is copied
// back, which saves two passes over the gradients and their memory. If
// .grad is replaced (zero_grad in LibTorch 2.x resets it to undefined), the
// hook copies it into the bucket and the end of backward points .grad at
// the bucket again. Under fp16/bf16 compression the bucket's dtype is not
// the parameter's, and .grad stays a copy.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "collectives/plan.hpp"
#include "comm/communicator.hpp"
#include "ddp/bucket_plan.hpp"
#include "ddp/grad_ready_hooks.hpp"

namespace distlab::ddp {

// Gradients on the wire, as PyTorch's fp16_compress_hook and
// bf16_compress_hook do: cast, divide, all-reduce, cast back.
enum class Compression { kNone, kFp16, kBf16 };
const char* to_string(Compression compression);

struct ReducerOptions {
  int64_t bucket_cap_bytes = kDefaultBucketCapBytes;     // <= 0: one bucket per parameter
  int64_t first_bucket_bytes = kDefaultFirstBucketBytes;
  bool find_unused_parameters = false;
  bool rebuild_buckets = true;  // after the first synchronized step, in the order gradients became ready
  bool gradient_as_bucket_view = false;  // .grad shares the bucket's memory (see above)
  // true: a bucket all-reduces as soon as its gradients are in, while the
  // backward goes on. false: every bucket once the backward is done (the
  // same buckets, the same sums). Where the ranks already fill every core
  // and the transport's copies are CPU work (shared memory), overlapping
  // only makes them take turns with the backward (docs/benchmarks-wire.md).
  bool overlap = true;
  collectives::Algorithm algorithm = collectives::Algorithm::kNative;
  // true: where the backend can (Communicator::all_reduces_parts_in_place:
  // shared memory, one copy), a bucket is all-reduced where its gradients
  // lie, in .grad, with no buffer and no copies in or out; the same sums bit
  // for bit. false: always through the bucket's buffer.
  bool in_place = true;
  Compression compression = Compression::kNone;
  int tag = 0;                  // collective tag of the bucket all-reduces (see collectives/tags.hpp)
};

// What the reducer has done so far (lesson 07 counts the bytes).
struct ReducerStats {
  int64_t synced_steps = 0;   // backwards that all-reduced
  int64_t local_steps = 0;    // backwards under no_sync
  int64_t all_reduces = 0;    // bucket all-reduces launched
  int64_t bytes = 0;          // bytes of buckets all-reduced (as sent: compressed size)
};

struct ReducerState;

class Reducer {
 public:
  // `params` are the parameters to synchronize (unique, requires_grad),
  // `names` theirs. Every rank builds its reducer with the same list.
  Reducer(comm::Communicator& comm, std::vector<at::Tensor> params, std::vector<std::string> names,
          ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Before each forward: whether the coming backward all-reduces (false
  // inside no_sync). Rebuilds the buckets when one synchronized step has
  // shown the order gradients become ready. Throws if the previous
  // synchronized backward never finished.
  void prepare_for_backward(bool sync);

  // Normally run by the autograd engine at the end of backward; callable by
  // hand (e.g. after autograd::grad, which queues no callback). Idempotent.
  void finalize();

  const BucketPlan& plan() const;
  ReducerStats stats() const;
  // One flat buffer per bucket, which the all-reduces run on: DDP's
  // communication buffers (the .grads share them with gradient_as_bucket_view).
  // A bucket all-reduced in place (ReducerOptions::in_place) has none.
  std::vector<at::Tensor> bucket_buffers() const;

 private:
  std::shared_ptr<ReducerState> state_;
  std::unique_ptr<GradReadyHooks> hooks_;  // each calls state_->on_grad_ready
};

}  // namespace distlab::ddp
