// Both models split by hand into 1, 2 and 4 stages: the stages' parameter
// names together are the whole model's, each exactly once, and the chained
// stages compute what the whole model computes once they hold its weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "model_test_util.hpp"
#include "models/copy_state.hpp"
#include "models/gpt.hpp"
#include "models/transformer_lm.hpp"

namespace distlab::models {
namespace {

using testing::max_abs_diff;
using testing::parameter_names;

// ---------------------------------------------------------------- split_layers

TEST(SplitLayers, SeedsManualSplit) {
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(split_layers(8, 2), (Ranges{{0, 4}, {4, 8}}));  // the pipelining tutorial's
  EXPECT_EQ(split_layers(8, 1), (Ranges{{0, 8}}));
  EXPECT_EQ(split_layers(8, 4), (Ranges{{0, 2}, {2, 4}, {4, 6}, {6, 8}}));
  EXPECT_EQ(split_layers(5, 2), (Ranges{{0, 3}, {3, 5}}));
  EXPECT_EQ(split_layers(5, 4), (Ranges{{0, 2}, {2, 3}, {3, 4}, {4, 5}}));
}

TEST(SplitLayers, CoversEveryLayerOnceAndBalances) {
  for (int64_t n = 1; n <= 12; ++n)
    for (int64_t p = 1; p <= n; ++p) {
      const auto ranges = split_layers(n, p);
      ASSERT_EQ(static_cast<int64_t>(ranges.size()), p);
      int64_t next = 0, smallest = n, largest = 0;
      for (const auto& [first, end] : ranges) {
        EXPECT_EQ(first, next) << "n=" << n << " p=" << p;
        smallest = std::min(smallest, end - first);
        largest = std::max(largest, end - first);
        next = end;
      }
      EXPECT_EQ(next, n);
      EXPECT_GE(smallest, 1);
      EXPECT_LE(largest - smallest, 1) << "n=" << n << " p=" << p;
    }
}

TEST(SplitLayers, RejectsImpossibleSplits) {
  EXPECT_THROW(split_layers(4, 0), std::invalid_argument);
  EXPECT_THROW(split_layers(4, 5), std::invalid_argument);
  GptOptions options{/*dim=*/16, /*n_layers=*/4, /*n_heads=*/2, /*vocab_size=*/10};
  EXPECT_THROW(Gpt(options, 2, 2), std::invalid_argument);
  EXPECT_THROW(Gpt(options, 0, 5), std::invalid_argument);
  EXPECT_THROW(Gpt(options, -1, 2), std::invalid_argument);
}

// ------------------------------------------------------ names and composition

GptOptions small_gpt() {
  GptOptions options;
  options.dim = 32, options.n_layers = 4, options.n_heads = 4, options.vocab_size = 50, options.ffn_dim = 48;
  return options;
}

TransformerLmOptions small_lm() {
  TransformerLmOptions options = transformer_lm_preset("tiny", /*ntokens=*/50);
  options.nlayers = 4;
  return options;
}

// The stages' names, concatenated in stage order, equal the whole model's in
// order; none repeats; each stage's named_parameters are a subset of the
// whole model's with the same shapes.
template <typename Model, typename Options>
void expect_stage_names_partition_model(const Options& options, int64_t n_layers) {
  torch::manual_seed(0);
  Model whole(options);
  const auto whole_parameters = whole->named_parameters();
  const auto whole_names = parameter_names(*whole);
  for (int64_t stages : {1, 2, 4}) {
    std::vector<std::string> joined;
    for (const auto& [first, end] : split_layers(n_layers, stages)) {
      Model stage(options, first, end);
      for (const auto& item : stage->named_parameters()) {
        const at::Tensor* same = whole_parameters.find(item.key());
        ASSERT_NE(same, nullptr) << "stage [" << first << ", " << end << ") has " << item.key();
        EXPECT_EQ(same->sizes(), item.value().sizes()) << item.key();
        joined.push_back(item.key());
      }
    }
    EXPECT_EQ(joined, whole_names) << stages << " stages";
    EXPECT_EQ(std::set<std::string>(joined.begin(), joined.end()).size(), joined.size()) << "a name repeats";
  }
}

TEST(GptSplit, StageNamesPartitionTheModel) {
  expect_stage_names_partition_model<Gpt>(small_gpt(), 4);
  torch::manual_seed(0);
  Gpt whole(small_gpt());
  // The pipelining tutorial's names, spelled out.
  const auto names = parameter_names(*whole);
  EXPECT_EQ(names.front(), "tok_embeddings.weight");
  EXPECT_EQ(names[1], "layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(names.back(), "output.bias");
  Gpt second_half(small_gpt(), 2, 4);
  EXPECT_EQ(parameter_names(*second_half).front(), "layers.2.self_attn.in_proj_weight");
  EXPECT_FALSE(second_half->has_embedding());
  EXPECT_TRUE(second_half->has_output());
}

TEST(TransformerLmSplit, StageNamesPartitionTheModel) {
  expect_stage_names_partition_model<TransformerLm>(small_lm(), 4);
  TransformerLm whole(small_lm());
  const auto names = parameter_names(*whole);
  EXPECT_EQ(names.front(), "encoder.weight");
  EXPECT_EQ(names[1], "layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(names[names.size() - 2], "decoder.weight");
  EXPECT_EQ(names.back(), "decoder.bias");
  EXPECT_EQ(whole->named_buffers().keys(), std::vector<std::string>{"pos_encoder.pe"});
  TransformerLm middle(small_lm(), 1, 3);
  EXPECT_TRUE(middle->named_buffers().is_empty());
}

// Stages built alone, given the whole model's weights by name, chained in
// order: the same logits as the whole model (eval mode: dropout off).
template <typename Model, typename Options>
void expect_chained_stages_equal_model(const Options& options, int64_t n_layers, const at::Tensor& tokens) {
  torch::manual_seed(1);
  Model whole(options);
  whole->eval();
  torch::NoGradGuard no_grad;
  const at::Tensor expected = whole(tokens);
  for (int64_t stages : {1, 2, 4}) {
    at::Tensor x = tokens;
    for (const auto& [first, end] : split_layers(n_layers, stages)) {
      Model stage(options, first, end);
      copy_state_by_name(*whole, *stage);
      stage->eval();
      x = stage(x);
    }
    ASSERT_EQ(x.sizes(), expected.sizes());
    const double diff = max_abs_diff(x, expected);
    EXPECT_LE(diff, 1e-5) << stages << " stages: max |diff| " << diff;
  }
}

TEST(GptSplit, ChainedStagesEqualWholeModel) {
  const GptOptions options = small_gpt();
  torch::manual_seed(2);
  const at::Tensor tokens = torch::randint(options.vocab_size, {6, 3}, torch::kLong);  // (A, B)
  expect_chained_stages_equal_model<Gpt>(options, options.n_layers, tokens);
  torch::manual_seed(1);
  Gpt whole(options);
  whole->eval();
  torch::NoGradGuard no_grad;
  const at::Tensor logits = whole(tokens);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{6, 3, options.vocab_size}));
  EXPECT_EQ(logits.scalar_type(), at::kFloat);
  Gpt first(options, 0, 2);
  EXPECT_EQ(first(tokens).sizes(), (std::vector<int64_t>{6, 3, options.dim}));
}

TEST(TransformerLmSplit, ChainedStagesEqualWholeModel) {
  for (bool causal : {false, true}) {
    TransformerLmOptions options = small_lm();
    options.causal = causal;
    torch::manual_seed(3);
    const at::Tensor src = torch::randint(options.ntokens, {7, 3}, torch::kLong);  // (S, N)
    expect_chained_stages_equal_model<TransformerLm>(options, options.nlayers, src);
  }
}

// The causal mask is real: logits at position s do not change when tokens
// after s change, and do without the mask.
TEST(TransformerLm, CausalMaskHidesLaterTokens) {
  for (bool causal : {false, true}) {
    TransformerLmOptions options = small_lm();
    options.causal = causal;
    torch::manual_seed(4);
    TransformerLm model(options);
    model->eval();
    torch::NoGradGuard no_grad;
    at::Tensor src = torch::randint(options.ntokens, {6, 2}, torch::kLong);
    at::Tensor changed = src.clone();
    changed[5] = (changed[5] + 1) % options.ntokens;
    const double diff_before = max_abs_diff(model(src).slice(0, 0, 5), model(changed).slice(0, 0, 5));
    if (causal)
      EXPECT_EQ(diff_before, 0.0);
    else
      EXPECT_TRUE(test_support::exceeds(diff_before, 1e-4)) << diff_before;
  }
}

// units() cuts a stage into one-tensor steps (ZeRO-3 runs them one by one):
// run in order they compute the stage's forward, and they hold the stage's
// own parameter tensors, each once, in registration order.
TEST(TransformerLm, UnitsChainEqualsForwardAndShareParameters) {
  for (bool causal : {false, true})
    for (const auto& [first, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {0, 2}, {2, 4}, {1, 3}}) {
      TransformerLmOptions options = small_lm();
      options.causal = causal;
      options.dropout = 0;
      torch::manual_seed(5);
      TransformerLm stage(options, first, end);
      torch::nn::Sequential units = stage->units();
      const at::Tensor input = first == 0 ? torch::randint(options.ntokens, {5, 2}, torch::kLong)
                                          : torch::randn({5, 2, options.emsize});
      at::Tensor chained = input;
      for (auto& unit : *units) chained = unit.forward(chained);
      EXPECT_TRUE(at::equal(chained, stage(input))) << "stage [" << first << ", " << end << ") causal " << causal;
      const auto mine = stage->parameters(), theirs = units->parameters();
      ASSERT_EQ(mine.size(), theirs.size());
      for (size_t i = 0; i < mine.size(); ++i)
        EXPECT_EQ(mine[i].unsafeGetTensorImpl(), theirs[i].unsafeGetTensorImpl()) << "parameter " << i;
      const int64_t expected_units = (end - first) + (first == 0 ? 1 : 0) + (end == options.nlayers ? 1 : 0);
      EXPECT_EQ(static_cast<int64_t>(units->size()), expected_units);
      if (first > 0) EXPECT_THROW(units->forward(torch::randint(3, {5, 2}, torch::kLong)), c10::Error);
    }
}

// A stage takes exactly the whole model's values, and refuses a source that
// lacks one of its tensors or holds it with another shape.
TEST(CopyStateByName, CopiesValuesAndRejectsMismatches) {
  torch::manual_seed(8);
  Gpt whole(small_gpt());
  Gpt stage(small_gpt(), 2, 4);
  copy_state_by_name(*whole, *stage);
  const auto whole_parameters = whole->named_parameters();
  for (const auto& item : stage->named_parameters())
    EXPECT_TRUE(at::equal(item.value(), whole_parameters[item.key()])) << item.key();
  EXPECT_TRUE(stage->named_parameters()["output.bias"].requires_grad());

  Gpt first_half(small_gpt(), 0, 2);
  EXPECT_THROW(copy_state_by_name(*first_half, *stage), std::invalid_argument);  // no layers.2
  GptOptions wider = small_gpt();
  wider.vocab_size = 51;
  Gpt other(wider);
  EXPECT_THROW(copy_state_by_name(*other, *stage), std::invalid_argument);  // output (51, 32)
}

TEST(Models, StagesRejectTheWrongInput) {
  Gpt second(small_gpt(), 2, 4);
  EXPECT_THROW(second(torch::zeros({4, 2}, torch::kLong)), c10::Error);
  Gpt first(small_gpt(), 0, 2);
  EXPECT_THROW(first(torch::zeros({4, 2, 32})), c10::Error);
  TransformerLm lm(small_lm());
  EXPECT_THROW(lm(torch::zeros({5001, 1}, torch::kLong)), c10::Error);
  EXPECT_THROW(transformer_lm_preset("huge", 10), std::invalid_argument);
}

}  // namespace
}  // namespace distlab::models
