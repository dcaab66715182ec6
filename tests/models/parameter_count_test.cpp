// Parameter counts: the analytic count from options equals what an
// allocated model holds (whole and per stage), the tutorial's configuration
// gives the count the tutorial printed, and the tutorial's initialisation.
#include <gtest/gtest.h>

#include <cmath>

#include "models/gpt.hpp"
#include "models/transformer_lm.hpp"

namespace distlab::models {
namespace {

TEST(ParameterCount, FormatsAsTheTutorialPrints) {
  EXPECT_EQ(format_parameter_count(1041453167), "Total parameters in model: 1,041,453,167");
  EXPECT_EQ(format_parameter_count(0), "Total parameters in model: 0");
  EXPECT_EQ(format_parameter_count(999), "Total parameters in model: 999");
  EXPECT_EQ(format_parameter_count(1000), "Total parameters in model: 1,000");
  EXPECT_EQ(format_parameter_count(123456), "Total parameters in model: 123,456");
}

// One TransformerEncoderLayer(d 4, ffn 6), worked out by hand:
// in_proj 12x4 + 12, out_proj 4x4 + 4, linear1 6x4 + 6, linear2 4x6 + 4,
// norm1, norm2 4 + 4 each: 60 + 20 + 30 + 28 + 16 = 154.
// Embedding and decoder for 10 tokens: 40 + (40 + 10) = 90.
TEST(ParameterCount, SmallLmByHand) {
  TransformerLmOptions options;
  options.ntokens = 10, options.emsize = 4, options.nhid = 6, options.nlayers = 1, options.nhead = 2;
  EXPECT_EQ(count_parameters(options), 154 + 90);
  TransformerLm model(options);
  EXPECT_EQ(count_parameters(*model), 154 + 90);
}

TEST(ParameterCount, AnalyticEqualsAllocatedForLmPresets) {
  for (const std::string preset : {"tiny", "cpu"})
    for (int64_t ntokens : {50, 28783}) {
      const TransformerLmOptions options = transformer_lm_preset(preset, ntokens);
      TransformerLm whole(options);
      EXPECT_EQ(count_parameters(options), count_parameters(*whole)) << preset << " " << ntokens;
      for (int64_t stages = 1; stages <= options.nlayers; ++stages)
        for (const auto& [first, end] : split_layers(options.nlayers, stages)) {
          TransformerLm stage(options, first, end);
          EXPECT_EQ(count_parameters(options, first, end), count_parameters(*stage))
              << preset << " [" << first << ", " << end << ")";
        }
    }
}

TEST(ParameterCount, AnalyticEqualsAllocatedForGptShapes) {
  std::vector<GptOptions> shapes;
  shapes.push_back(GptOptions{16, 1, 2, 10, 32, 0.1});
  shapes.push_back(GptOptions{32, 4, 4, 50, 48, 0.1});
  shapes.push_back(GptOptions{24, 3, 3, 7, 2048, 0.0});
  shapes.push_back(GptOptions{64, 2, 8, 1000});  // the tutorial's default ffn 2048
  for (const GptOptions& options : shapes) {
    Gpt whole(options);
    EXPECT_EQ(count_parameters(options), count_parameters(*whole)) << "dim " << options.dim;
    for (int64_t stages = 1; stages <= options.n_layers; ++stages)
      for (const auto& [first, end] : split_layers(options.n_layers, stages)) {
        Gpt stage(options, first, end);
        EXPECT_EQ(count_parameters(options, first, end), count_parameters(*stage))
            << "dim " << options.dim << " [" << first << ", " << end << ")";
      }
  }
}

// The count the tutorial printed for d 4096, ffn 4096, 16 heads, 8 layers
// and WikiText-2's 28,783-token vocabulary (REFERENCES.md), from options
// alone: the model would be ~4 GB of float32.
TEST(ParameterCount, TutorialPresetMatchesThePrintedCount) {
  const TransformerLmOptions options = transformer_lm_preset("tutorial", 28783);
  EXPECT_EQ(options.emsize, 4096);
  EXPECT_EQ(options.nhid, 4096);
  EXPECT_EQ(options.nhead, 16);
  EXPECT_EQ(options.nlayers, 8);
  EXPECT_DOUBLE_EQ(options.dropout, 0.2);
  EXPECT_EQ(count_parameters(options), 1041453167);
  EXPECT_EQ(format_parameter_count(count_parameters(options)), "Total parameters in model: 1,041,453,167");
  // The tutorial's two partitions of 4 layers add up to the whole.
  EXPECT_EQ(count_parameters(options, 0, 4) + count_parameters(options, 4, 8), 1041453167);
  // The pipelining tutorial's defaults: 8 decoder layers of dim 512.
  EXPECT_EQ(count_parameters(GptOptions{}),
            10000 * 512 + 8 * (2 * (4 * 512 * 512 + 4 * 512) + 2 * 512 * 2048 + 2048 + 512 + 6 * 512) + 2 * 512 +
                512 * 10000 + 10000);
}

TEST(TransformerLmInit, TutorialsInitialisation) {
  torch::manual_seed(5);
  TransformerLm model(transformer_lm_preset("tiny", 1000));
  const auto parameters = model->named_parameters();
  for (const std::string name : {"encoder.weight", "decoder.weight"}) {
    const at::Tensor& weight = parameters[name];
    EXPECT_LE(weight.max().item<double>(), 0.1) << name;
    EXPECT_GE(weight.min().item<double>(), -0.1) << name;
    // Uniform over the whole range, not left at a default: extremes near +-0.1, spread ~0.1/sqrt(3).
    EXPECT_GT(weight.max().item<double>(), 0.099) << name;
    EXPECT_LT(weight.min().item<double>(), -0.099) << name;
    EXPECT_NEAR(weight.std().item<double>(), 0.1 / std::sqrt(3.0), 0.002) << name;
  }
  EXPECT_EQ(parameters["decoder.bias"].abs().max().item<double>(), 0.0);
  // A last stage built alone is initialised the same way.
  TransformerLm last(transformer_lm_preset("tiny", 1000), 1, 2);
  EXPECT_EQ(last->named_parameters()["decoder.bias"].abs().max().item<double>(), 0.0);
  EXPECT_LE(last->named_parameters()["decoder.weight"].abs().max().item<double>(), 0.1);
}

TEST(TransformerLmPresets, SensibleSizes) {
  for (const std::string& name : transformer_lm_preset_names()) {
    const TransformerLmOptions options = transformer_lm_preset(name, 1000);
    EXPECT_EQ(options.emsize % options.nhead, 0) << name;
    EXPECT_EQ(options.nlayers % 2, 0) << name << ": 2 stages need an even layer count";
  }
  EXPECT_LT(count_parameters(transformer_lm_preset("tiny", 1000)), 200000);
  EXPECT_LT(count_parameters(transformer_lm_preset("cpu", 1000)), 2000000);
}

}  // namespace
}  // namespace distlab::models
