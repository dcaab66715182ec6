// FLOP counts (memory/flops.hpp) against counts made here by hand, product
// by product, and the matmul weights against the real model's parameters.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "memory/flops.hpp"
#include "models/transformer_lm.hpp"

namespace {

using namespace distlab::memory;

// The tiny preset's layer (d 32, feed-forward 64) attending 35 positions.
constexpr int64_t d = 32, f = 64, s = 35, V = 300, L = 2;

// One token through one layer: each product (1 x k) by (k x n) is 2 k n.
TEST(Flops, OneLayerAgainstAHandCount) {
  const int64_t q = 2 * d * d, k = 2 * d * d, v = 2 * d * d, out = 2 * d * d;
  const int64_t up = 2 * d * f, down = 2 * f * d;
  const int64_t scores = 2 * d * s;    // q (1 x d) by K^T (d x s)
  const int64_t weighted = 2 * s * d;  // the weights (1 x s) by V (s x d)
  const FlopShape shape{d, f, L, s, V};
  EXPECT_EQ(layer_forward_flops(shape), q + k + v + out + up + down + scores + weighted);
  EXPECT_EQ(layer_forward_flops(shape), 20864);
}

// 6 N + 12 L s d is three times the forward (the backward is twice it): the
// layers' products and the decoder's (1 x d) by (d x V).
TEST(Flops, AStepIsThreeForwards) {
  const FlopShape shape{d, f, L, s, V};
  EXPECT_EQ(model_flops_per_token(shape), 3 * (L * layer_forward_flops(shape) + 2 * d * V));
  EXPECT_EQ(hardware_flops_per_token(shape, Recompute::kNone), model_flops_per_token(shape));
  EXPECT_EQ(hardware_flops_per_token(shape, Recompute::kFull),
            model_flops_per_token(shape) + L * layer_forward_flops(shape));
  // Selective runs the attention core's two products again (q k^T, the
  // weights times V: 2 x 2 s d a token a layer); matmuls none.
  EXPECT_EQ(hardware_flops_per_token(shape, Recompute::kSelective), model_flops_per_token(shape) + L * 4 * s * d);
  EXPECT_EQ(hardware_flops_per_token(shape, Recompute::kMatmuls), model_flops_per_token(shape));
}

// N, the weights that multiply, against the model LibTorch builds: every
// layer's in_proj (3d x d), out_proj (d x d), linear1 (f x d) and linear2
// (d x f), and the decoder (V x d); not the embedding, norms or biases.
TEST(Flops, MatmulWeightsAreTheModelsProductWeights) {
  distlab::models::TransformerLmOptions o = distlab::models::transformer_lm_preset("tiny", V);
  ASSERT_EQ(o.emsize, d);
  ASSERT_EQ(o.nhid, f);
  ASSERT_EQ(o.nlayers, L);
  distlab::models::TransformerLm model(o);
  int64_t weights = 0;
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const bool product = name.find("in_proj_weight") != std::string::npos ||
                         name.find("out_proj.weight") != std::string::npos ||
                         name.find("linear1.weight") != std::string::npos ||
                         name.find("linear2.weight") != std::string::npos || name == "decoder.weight";
    if (product) weights += item.value().numel();
  }
  EXPECT_EQ(matmul_weights({d, f, L, s, V}), weights);
}

// The peak is 2 n^3 FLOPs over the fastest timed product, in FLOP/s. On a
// clock the test drives, the three products of side 256 take 4/1024, 2/1024
// and 8/1024 s (exact in binary), so the peak is exactly
// 2 x 2^24 / (2/1024) = 2^34 FLOP/s; the clock is read twice a product and
// never around the untimed first one. The same in float32, bfloat16 and
// float16's emulation. On the steady clock it is a positive number.
TEST(Flops, TheMatmulPeakIsTwoNCubedOverTheFastestProduct) {
  for (const c10::ScalarType dtype : {c10::kFloat, c10::kBFloat16, c10::kHalf}) {
    const std::vector<double> readings{10, 10 + 4.0 / 1024, 20, 20 + 2.0 / 1024, 30, 30 + 8.0 / 1024};
    size_t read = 0;
    const double flops = matmul_flops_per_second(256, 3, /*cuda=*/false, dtype, [&] {
      return read < readings.size() ? readings[read++] : std::nan("");  // a seventh reading would spoil the result
    });
    EXPECT_EQ(read, readings.size()) << dtype;
    EXPECT_DOUBLE_EQ(flops, 2.0 * 256 * 256 * 256 / (2.0 / 1024)) << dtype;
    EXPECT_DOUBLE_EQ(flops, std::ldexp(1.0, 34)) << dtype;
  }
  const double measured = matmul_flops_per_second(128, 2);
  EXPECT_TRUE(std::isfinite(measured) && measured > 0) << measured;
}

// 700 tokens a step (20 columns x 35 rows), 10 steps in 2 s: 3500 tokens/s;
// on a 1 GFLOP/s peak, MFU is 3500 x (6N + 12Lsd) / 1e9, HFU adds the
// second forward of each layer under full recomputation.
TEST(Flops, UtilisationIsTheFlopRateOverThePeak) {
  const FlopShape shape{d, f, L, s, V};
  const double per_token = 6.0 * (L * (4 * d * d + 2 * d * f) + d * V) + 12.0 * L * s * d;
  const Utilisation plain = utilisation(shape, Recompute::kNone, 7000, 2.0, 1e9);
  EXPECT_DOUBLE_EQ(plain.tokens_per_second, 3500);
  EXPECT_DOUBLE_EQ(plain.model_flops_per_second, 3500 * per_token);
  EXPECT_DOUBLE_EQ(plain.mfu, 3500 * per_token / 1e9);
  EXPECT_DOUBLE_EQ(plain.hfu, plain.mfu);
  const Utilisation again = utilisation(shape, Recompute::kFull, 7000, 2.0, 1e9);
  EXPECT_DOUBLE_EQ(again.mfu, plain.mfu);  // the model's work is the same
  EXPECT_DOUBLE_EQ(again.hfu, 3500 * (per_token + L * 20864.0) / 1e9);
  EXPECT_EQ(utilisation(shape, Recompute::kNone, 7000, 0, 1e9).mfu, 0);  // no time measured: nothing claimed
}

}  // namespace
