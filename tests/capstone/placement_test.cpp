// Where each of a rank's parameters lives (RankStage::placed_parameters),
// against tables written by hand from Megatron's rules for the tiny preset
// (2 layers): cut over a tensor group of 2, the attention's q, k and v and
// the first MLP matrix by columns (weights and biases), the attention's
// output and the second MLP matrix by rows (weights only); everything else
// replicated; with 4 experts spread over 2 ranks, the experts' matrices
// spread and the router replicated. Every parameter once, in the module's
// order, and each placement's group.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/threads_backend.hpp"
#include "train/stage_model.hpp"

namespace distlab::train {
namespace {

models::TransformerLmOptions tiny(int experts = 0) {
  models::TransformerLmOptions o = models::transformer_lm_preset("tiny", /*ntokens=*/40);
  o.dropout = 0;
  o.causal = true;
  o.moe.experts = experts;
  return o;
}

std::map<std::string, std::string> placements_of(const RankStage& stage) {
  std::map<std::string, std::string> out;
  for (const PlacedParameter& p : stage.placed_parameters()) out[p.name] = placement_name(p.placement);
  return out;
}

TEST(Placement, AWholeStageIsReplicated) {
  comm::run_thread_ranks(1, [&](comm::Communicator& tensor) {
    RankStage stage(build_stage(tiny(), 0, 1, 3), tensor);
    const std::vector<PlacedParameter> placed = stage.placed_parameters();
    ASSERT_EQ(placed.size(), stage.parameters().size());
    for (const PlacedParameter& p : placed) EXPECT_EQ(p.placement, Placement::kReplicated) << p.name;
    EXPECT_EQ(stage.group_of(Placement::kCut), nullptr);
    EXPECT_EQ(stage.group_of(Placement::kSpread), nullptr);
  });
}

TEST(Placement, CutOverATensorGroupOfTwo) {
  std::map<std::string, std::string> want{{"encoder.weight", "replicated"}, {"decoder.weight", "replicated"},
                                          {"decoder.bias", "replicated"}};
  for (const std::string layer : {"layers.0.", "layers.1."}) {
    for (const char* cut : {"self_attn.q_weight", "self_attn.k_weight", "self_attn.v_weight", "self_attn.q_bias",
                            "self_attn.k_bias", "self_attn.v_bias", "self_attn.out_proj.weight", "linear1.weight",
                            "linear1.bias", "linear2.weight"})
      want[layer + cut] = "cut";
    for (const char* replicated : {"self_attn.out_proj.bias", "linear2.bias", "norm1.weight", "norm1.bias",
                                   "norm2.weight", "norm2.bias"})
      want[layer + replicated] = "replicated";
  }
  std::mutex mutex;
  std::vector<std::map<std::string, std::string>> seen;
  comm::run_thread_ranks(2, [&](comm::Communicator& tensor) {
    RankStage stage(build_stage(tiny(), 0, 1, 3), tensor);
    const std::vector<PlacedParameter> placed = stage.placed_parameters();
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(placed.size(), stage.parameters().size());  // once each
    for (size_t i = 0; i < placed.size(); ++i)             // in the module's order
      EXPECT_TRUE(placed[i].tensor.is_same(stage.parameters()[i])) << placed[i].name;
    EXPECT_EQ(stage.group_of(Placement::kCut), &tensor);
    EXPECT_EQ(stage.group_of(Placement::kReplicated), nullptr);
    seen.push_back(placements_of(stage));
  });
  for (const auto& placements : seen) EXPECT_EQ(placements, want);
}

TEST(Placement, ExpertsSpreadOverTwoRanks) {
  std::map<std::string, std::string> want{{"encoder.weight", "replicated"}, {"decoder.weight", "replicated"},
                                          {"decoder.bias", "replicated"}};
  for (const std::string layer : {"layers.0.", "layers.1."}) {
    for (const char* replicated : {"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                                   "self_attn.out_proj.bias", "norm1.weight", "norm1.bias", "norm2.weight",
                                   "norm2.bias", "moe.router.weight"})
      want[layer + replicated] = "replicated";
    for (const char* spread : {"moe.experts.w1", "moe.experts.b1", "moe.experts.w2", "moe.experts.b2"})
      want[layer + spread] = "spread";
  }
  std::mutex mutex;
  std::vector<std::map<std::string, std::string>> seen;
  comm::run_thread_ranks(2, [&](comm::Communicator& replicas) {
    // Each rank its own tensor group of one.
    const std::unique_ptr<comm::Communicator> tensor = replicas.split(replicas.rank(), 0, "tensor");
    RankStage stage(build_stage(tiny(/*experts=*/4), 0, 1, 3), *tensor);
    stage.spread_experts(replicas);
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(stage.placed_parameters().size(), stage.parameters().size());
    EXPECT_EQ(stage.group_of(Placement::kSpread), &replicas);
    for (const at::Tensor& p : stage.parameters_placed(Placement::kSpread))
      EXPECT_EQ(p.size(0), 2) << "each rank keeps 2 of the 4 experts";
    seen.push_back(placements_of(stage));
  });
  for (const auto& placements : seen) EXPECT_EQ(placements, want);
}

}  // namespace
}  // namespace distlab::train
