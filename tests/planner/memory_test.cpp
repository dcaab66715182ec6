// Memory per rank by category: against a layout worked out by hand here,
// and against what the allocator meter (memory/allocator_meter.hpp)
// measures when build_rank builds a layout and a step runs on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "comm/job.hpp"
#include "data/batching.hpp"
#include "memory/allocator_meter.hpp"
#include "memory/recompute.hpp"
#include "planner/memory_model.hpp"
#include "train/rank_build.hpp"

namespace distlab::planner {
namespace {

ModelShape small_model() {
  ModelShape m = model_shape("tiny", 50);  // d 32, ffn 64, 2 heads, dropout 0.2
  m.lm.nlayers = 4;
  return m;
}

// The tiny preset with 4 layers, vocabulary 50, on 2 stages x 2 replicas,
// 1F1B, 4 microbatches of ceil(ceil(20 / 2) / 4) = 3 columns, DDP.
TEST(MemoryModel, TwoByTwoWorkedOutByHand) {
  Choice c;
  c.layout = train::Layout{2, 2, 1, 1};
  c.pipeline.microbatches = 4;
  const MemoryPrediction p = predict_memory(small_model(), c);
  ASSERT_EQ(p.ranks.size(), 2u);
  // A layer's tensors: in_proj 96 x 32 + 96, out_proj 32 x 32 + 32,
  // linear1 64 x 32 + 64, linear2 32 x 64 + 32, two norms 2 x (32 + 32).
  const int64_t layer = 96 * 32 + 96 + 32 * 32 + 32 + 64 * 32 + 64 + 32 * 64 + 32 + 2 * 64;
  ASSERT_EQ(layer, 8544);
  const int64_t stage0 = 50 * 32 + 2 * layer;            // embedding, layers 0 and 1
  const int64_t stage1 = 2 * layer + 50 * 32 + 50;       // layers 2 and 3, decoder
  EXPECT_EQ(p.ranks[0].parameters, 4 * stage0);
  EXPECT_EQ(p.ranks[1].parameters, 4 * stage1);
  EXPECT_EQ(p.ranks[0].gradients, 4 * stage0);
  EXPECT_EQ(p.ranks[1].gradients, 4 * stage1);
  EXPECT_EQ(p.ranks[0].optimizer_state, 0);  // plain SGD
  // The positional table (5000 x 32 floats) and DDP's buckets (a copy of the gradients).
  EXPECT_EQ(p.ranks[0].buffers, 4 * 5000 * 32 + 4 * stage0);
  EXPECT_EQ(p.ranks[1].buffers, 4 * stage1);
  // Activations per layer and microbatch, U = s b h = 35 x 3 x 32, F = 35 x 3 x 64,
  // A = a s^2 b = 2 x 35^2 x 3, dropout on (k = 3, two U-sized noises):
  // 4 (4U + 3F + 3A) inside, 4 (2U + U + U + 2U + 4 s b) outside.
  const int64_t U = 35 * 3 * 32, F = 35 * 3 * 64, A = 2 * 35 * 35 * 3;
  const int64_t per_layer = 4 * (4 * U + 3 * F + 3 * A) + 4 * (6 * U + 4 * 35 * 3);
  // 1F1B holds P - stage microbatches: stage 0 two, stage 1 one.
  EXPECT_EQ(p.ranks[0].microbatches_held, 2);
  EXPECT_EQ(p.ranks[1].microbatches_held, 1);
  EXPECT_EQ(p.ranks[0].activations, 2 * (2 * per_layer + 4 * 3 * U));  // + the embedding's three U tensors
  // + its received input and the logits' log-softmax (35 x 3 x 50 floats).
  EXPECT_EQ(p.ranks[1].activations, 2 * per_layer + 4 * U + 4 * 35 * 3 * 50);
  // The backward's first steps: on stage 0 the gradient received for its
  // output, the one flowing from it and linear's weight gradient (32 x 64)
  // before it is added into .grad; on the last the log-probabilities' and
  // the logits' gradients, s b V floats each.
  EXPECT_EQ(p.ranks[0].backward_scratch, 4 * (2 * U + 32 * 64));
  EXPECT_EQ(p.ranks[1].backward_scratch, 2 * 4 * 35 * 3 * 50);
}

// The corpus on a rank, against the tensors the trainer's own calls make
// from token streams of those lengths: replica 0's columns of the training
// matrix (20 columns on 3 replicas: 7, 7, 6), the validation and test
// matrices (10 columns), and at set-up the whole training matrix. With a
// training split this long, set-up is the rank's peak.
TEST(MemoryModel, TheCorpusAsTheTrainerBatchifiesIt) {
  ModelShape m = small_model();
  m.train_tokens = 1000003;
  m.valid_tokens = 2017;
  m.test_tokens = 1999;
  Choice c;
  c.layout = train::Layout{1, 3, 1, 1};
  const at::Tensor whole = data::batchify(at::arange(m.train_tokens), 20);
  const at::Tensor mine = data::shard_for_replica(whole, 0, 3, data::ReplicaSplit::kColumns);
  const int64_t kept = int64_t(mine.nbytes()) + int64_t(data::batchify(at::arange(m.valid_tokens), 10).nbytes()) +
                       int64_t(data::batchify(at::arange(m.test_tokens), 10).nbytes());
  ASSERT_EQ(mine.size(1), 7);
  const RankMemory r = predict_memory(m, c).ranks.at(0);
  EXPECT_EQ(r.data, kept);
  EXPECT_EQ(r.data_setup, int64_t(whole.nbytes()));
  EXPECT_EQ(r.setup(), r.parameters + r.buffers + kept + int64_t(whole.nbytes()));
  EXPECT_GT(r.setup(), r.training());
  EXPECT_EQ(r.total(), r.setup());
  // One replica: its columns are the matrix itself, not a copy beside it.
  ASSERT_EQ(data::shard_for_replica(whole, 0, 1, data::ReplicaSplit::kColumns).data_ptr(), whole.data_ptr());
  Choice one = c;
  one.layout = train::Layout{1, 1, 1, 1};
  EXPECT_EQ(predict_memory(m, one).ranks.at(0).data_setup, 0);
  // No corpus read (--vocab alone): nothing counted.
  const RankMemory none = predict_memory(small_model(), c).ranks.at(0);
  EXPECT_EQ(none.data + none.data_setup, 0);
  EXPECT_EQ(none.total(), none.training());
}

TEST(MemoryModel, ZeroShardsWhatEachStageSays) {
  Choice c;
  c.layout = train::Layout{1, 4, 1, 1};
  c.pipeline.microbatches = 1;
  const ModelShape m = small_model();
  const int64_t psi = stage_parameters(m, 0, 1, 1, 1), shard = (psi + 3) / 4;
  int64_t last_total = 0;
  for (int zero = 0; zero <= 3; ++zero) {
    c.data.zero = zero;
    const RankMemory r = predict_memory(m, c).ranks.at(0);
    EXPECT_EQ(r.parameters, 4 * (zero == 3 ? shard : psi)) << zero;
    // DDP's .grad; ZeRO-1's are its flat buckets (buffers, made with the
    // stage); ZeRO-2's bucket being filled at its backward's largest
    // gradient (here one bucket: the whole model is under 1 MiB); ZeRO-3's
    // whole .grad never meets one microbatch's activations.
    EXPECT_EQ(r.gradients, 4 * (zero == 0 || zero == 2 ? psi : 0)) << zero;
    EXPECT_EQ(r.gradient_shard, 4 * (zero >= 2 ? shard : 0)) << zero;
    // The positional table; DDP's buckets or ZeRO-1's; no ring scratch kept
    // (every chunk is under 1 MiB).
    EXPECT_EQ(r.buffers, 4 * 5000 * 32 + (zero <= 1 ? 4 * psi : 0)) << zero;
    if (zero > 1) EXPECT_LT(r.total(), last_total) << zero;
    last_total = r.total();
  }
  // Two microbatches: the second backward meets the first's whole .grad
  // (no_sync), with as many microbatches held as the first's.
  c.pipeline.microbatches = 2;
  for (int zero : {2, 3}) {
    c.data.zero = zero;
    EXPECT_EQ(predict_memory(m, c).ranks.at(0).gradients, 4 * psi) << zero;
  }
}

TEST(MemoryModel, RecomputationAndPrecisionShrinkTheActivations) {
  Choice c;
  c.layout = train::Layout{1, 1, 1, 1};
  c.pipeline.microbatches = 1;
  const ModelShape m = small_model();
  const int64_t none = predict_memory(m, c).ranks[0].activations;
  c.memory.recompute = memory::Recompute::kFull;
  const int64_t full = predict_memory(m, c).ranks[0].activations;
  c.memory.recompute = memory::Recompute::kSelective;
  const int64_t selective = predict_memory(m, c).ranks[0].activations;
  EXPECT_LT(full, selective);
  EXPECT_LT(selective, none);
  // Full: each layer keeps its output 4U and the generator's state.
  // A microbatch's: each layer keeps its input (4U bytes) and the
  // generator's state, the embedding its three U tensors, the loss the
  // log-probabilities (s b V floats).
  const int64_t U = 35 * 20 * 32;
  c.memory.recompute = memory::Recompute::kFull;
  EXPECT_EQ(stage_activation_bytes(m, c, 0, 20),
            4 * (4 * U + memory::generator_state_bytes()) + 4 * 3 * U + 4 * 35 * 20 * 50);
}

TEST(MemoryModel, ParsesAndPrintsSizes) {
  EXPECT_EQ(parse_bytes("2GB"), int64_t(2) << 30);
  EXPECT_EQ(parse_bytes("512 MB"), int64_t(512) << 20);
  EXPECT_EQ(parse_bytes("1.5G"), int64_t(3) << 29);
  EXPECT_EQ(parse_bytes("4096"), 4096);
  EXPECT_THROW(parse_bytes("lots"), std::invalid_argument);
  EXPECT_THROW(parse_bytes("-1GB"), std::invalid_argument);
  EXPECT_THROW(parse_bytes("3 parsecs"), std::invalid_argument);
  EXPECT_EQ(bytes_text(1536), "1.5 KB");
  EXPECT_EQ(bytes_text(512), "512 B");
}

// Measured: the bytes the process's allocator holds once build_rank has
// built a layout (the parameters, the positional table, DDP's and ZeRO-1's
// buckets, ZeRO-2/3's gradient shard; with experts spread, ZeRO's second
// shard over their copies;
// the whole model built first and copied is freed; no gradient yet), all
// of its thread ranks together, against the sum of the ranks' predictions.
TEST(MemoryModel, ParametersAndBuffersAgainstTheAllocatorMeter) {
  memory::AllocatorMeter& meter = memory::AllocatorMeter::install();
  struct Case {
    train::Layout layout;
    int zero;
    int experts_over = 0;  // > 0: 4 experts a layer, spread over so many ranks
  };
  for (const Case& k : {Case{{1, 1, 1, 1}, 0}, Case{{2, 1, 1, 1}, 0}, Case{{2, 2, 1, 1}, 0}, Case{{1, 2, 1, 1}, 1},
                        Case{{1, 2, 1, 1}, 2}, Case{{1, 2, 1, 1}, 3}, Case{{1, 1, 2, 1}, 0}, Case{{1, 4, 1, 1}, 1, 2},
                        Case{{1, 4, 1, 1}, 2, 2}, Case{{1, 2, 2, 1}, 0, 2}, Case{{1, 4, 1, 1}, 0, 4},
                        Case{{1, 4, 1, 1}, 3, 2}}) {
    ModelShape m = small_model();
    if (k.experts_over > 0) m.lm.moe.experts = 4, m.lm.moe.top_k = 2;
    models::TransformerLmOptions lm = models::transformer_lm_preset("tiny", m.lm.ntokens);  // built here, not read off m
    lm.nlayers = 4;
    lm.causal = true;
    lm.moe = m.lm.moe;
    Choice c;
    c.layout = k.layout;
    c.data.zero = k.zero;
    c.experts.parallel = std::max(1, k.experts_over);
    c.pipeline.microbatches = 1;
    const MemoryPrediction predicted = predict_memory(m, c);
    int64_t expected = 0;  // every rank: its pipeline rank's parameters and buffers
    for (int r = 0; r < k.layout.world_size(); ++r) {
      const RankMemory& mine = predicted.ranks.at(static_cast<size_t>(train::place_of(r, k.layout).stage));
      expected += mine.parameters + mine.buffers + mine.gradient_shard;
    }
    const train::ParallelPlan plan = plan_of(m, c);
    comm::JobOptions job;
    job.ranks = k.layout.world_size();
    const int64_t before = meter.allocated();
    int64_t built = -1;
    comm::run_job(job, [&](comm::Communicator& world) {
      train::RankBuild b = train::build_rank(plan, world, lm, 1234, 0.1);
      world.barrier();  // every rank built before rank 0 reads the meter
      if (world.rank() == 0) built = meter.allocated() - before;
      world.barrier();  // and none frees its build before that
    });
    // One rank: to the byte. More: each rank's groups keep a few bytes of
    // their own (up to 100 a rank), which the model leaves out.
    if (k.layout.world_size() == 1) EXPECT_EQ(built, expected) << choice_name(c);
    EXPECT_GE(built, expected) << choice_name(c);
    EXPECT_LE(built, expected + 100 * k.layout.world_size()) << choice_name(c);
  }
}

}  // namespace
}  // namespace distlab::planner
