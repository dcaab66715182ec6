// The vocabulary-parallel embedding and cross-entropy (vocab.hpp) by hand
// on thread ranks: how a vocabulary is cut, which rank contributes which
// token before the parts are summed, the padding of a vocabulary the group
// does not divide, a loss worked out on paper, and the refusals. The checks
// against PyTorch's unsplit computation are in vocab_checks.cpp.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "comm/threads_backend.hpp"
#include "tensor_parallel/vocab.hpp"

namespace distlab::tensor_parallel {
namespace {

void expect_part(const VocabPart& p, int64_t first, int64_t rows, int64_t tokens) {
  EXPECT_EQ(p.first, first);
  EXPECT_EQ(p.rows, rows);
  EXPECT_EQ(p.tokens, tokens);
}

TEST(VocabParallel, EveryRankHoldsCeilVOverTRowsThePastVPadding) {
  expect_part(vocab_part(12, 4, 3), 9, 3, 3);
  expect_part(vocab_part(10, 4, 0), 0, 3, 3);
  expect_part(vocab_part(10, 4, 3), 9, 3, 1);  // token 9 and two padding rows
  expect_part(vocab_part(10, 3, 1), 4, 4, 4);
  expect_part(vocab_part(10, 3, 2), 8, 4, 2);
  expect_part(vocab_part(3, 4, 3), 3, 1, 0);  // more ranks than tokens: padding only
  EXPECT_THROW(vocab_part(0, 2, 0), std::invalid_argument);
}

// V = 6 on 2 ranks: rank 0 holds tokens 0-2, rank 1 tokens 3-5. Row v of the
// table is (2v + 1, 2v + 2), so row 0 is not zero: a token another rank owns,
// looked up as my row 0, must be zeroed to give nothing.
TEST(VocabParallel, EachTokenComesFromTheRankOwningIt) {
  const at::Tensor table = at::arange(1, 13, at::kFloat).reshape({6, 2});
  const at::Tensor tokens = at::tensor({0, 4, 2, 4, 3, 1}, at::kLong).reshape({3, 2});
  comm::run_thread_ranks(2, [&](comm::Communicator& group) {
    VocabParallelEmbedding embedding(group, table);
    const at::Tensor zero = at::zeros({2});
    auto row = [&](int64_t v) { return table[v]; };
    // Before the sum: rank 0 gives tokens 0, 2, 1, rank 1 gives 4, 4, 3.
    const at::Tensor partial = masked_lookup(embedding->weight, tokens, embedding->part().first);
    const at::Tensor expected =
        group.rank() == 0 ? at::stack({row(0), zero, row(2), zero, zero, row(1)}).reshape({3, 2, 2})
                          : at::stack({zero, row(4), zero, row(4), row(3), zero}).reshape({3, 2, 2});
    EXPECT_TRUE(at::equal(partial, expected)) << "rank " << group.rank() << "\n" << partial;
    // After it, every rank holds every token's row.
    const at::Tensor y = embedding(tokens);
    EXPECT_TRUE(at::equal(y, table.index({tokens}))) << y;
    // The gradient of sum(y): how often each of my tokens occurred.
    y.sum().backward();
    const at::Tensor counts = group.rank() == 0 ? at::tensor({1.f, 1.f, 1.f}) : at::tensor({1.f, 2.f, 0.f});
    EXPECT_TRUE(at::equal(embedding->weight.grad(), counts.unsqueeze(1).expand({3, 2}))) << embedding->weight.grad();
  });
}

// V = 5 on 2 ranks: parts of 3 rows, rank 1 holding tokens 3, 4 and a zero
// padding row; gathered back, the table is the same bytes. Token 5 would
// land on the padding row: refused by every rank.
TEST(VocabParallel, PaddedVocabularyRoundTripsAndRefusesTokensPastIt) {
  const at::Tensor table = at::randn({5, 4});
  comm::run_thread_ranks(2, [&](comm::Communicator& group) {
    VocabParallelEmbedding embedding(group, table);
    ASSERT_EQ(embedding->weight.sizes(), (at::IntArrayRef{3, 4}));
    if (group.rank() == 1) {
      EXPECT_TRUE(at::equal(embedding->weight.narrow(0, 0, 2), table.narrow(0, 3, 2)));
      EXPECT_TRUE(at::equal(embedding->weight[2], at::zeros({4})));
    }
    EXPECT_TRUE(at::equal(embedding->full_weight(), table));
    const at::Tensor some = at::tensor({4, 0, 3}, at::kLong);
    EXPECT_TRUE(at::equal(embedding(some), table.index({some})));
    try {
      embedding(at::tensor({1, 5}, at::kLong));
      ADD_FAILURE() << "token 5 of a vocabulary of 5 accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), "VocabParallelEmbedding: token 5 outside the vocabulary of 5 tokens (0 to 4)");
    }
  });
}

// Logits (0, ln 2, ln 3, ln 4) on 2 ranks, two columns each: softmax
// (1, 2, 3, 4) / 10. Row 0's target 2 costs ln(10/3), row 1's target 0
// ln 10, row 2 is ignored: loss (ln(10/3) + ln 10) / 2. The gradient of my
// columns: (softmax - one-hot) / 2, row 2 zero.
TEST(VocabParallel, CrossEntropyOnPaper) {
  const at::Tensor row = at::log(at::tensor({1.f, 2.f, 3.f, 4.f}));
  const at::Tensor logits = row.expand({3, 4});
  const at::Tensor targets = at::tensor({2, 0, -100}, at::kLong);
  comm::run_thread_ranks(2, [&](comm::Communicator& group) {
    at::Tensor x = logits.narrow(1, 2 * group.rank(), 2).clone().requires_grad_(true);
    const at::Tensor loss = vocab_parallel_cross_entropy(group, x, targets);
    EXPECT_NEAR(loss.item<double>(), (std::log(10.0 / 3) + std::log(10.0)) / 2, 1e-6);
    loss.backward();
    const at::Tensor softmax = at::tensor({0.1f, 0.2f, 0.3f, 0.4f});
    at::Tensor expected = at::stack({softmax - at::tensor({0.f, 0.f, 1.f, 0.f}),
                                     softmax - at::tensor({1.f, 0.f, 0.f, 0.f}), at::zeros({4})}) /
                          2;
    EXPECT_TRUE(at::allclose(x.grad(), expected.narrow(1, 2 * group.rank(), 2), 1e-6, 1e-7))
        << "rank " << group.rank() << "\n" << x.grad();
  });
}

TEST(VocabParallel, CrossEntropyRefusesTargetsAndPartsThatDoNotFit) {
  comm::run_thread_ranks(4, [&](comm::Communicator& group) {
    const at::Tensor logits = at::zeros({2, 3});  // V = 10 on 4 ranks: parts of 3 columns
    try {
      vocab_parallel_cross_entropy(group, logits, at::tensor({9, 10}, at::kLong), -100, 10);
      ADD_FAILURE() << "target 10 of a vocabulary of 10 accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()),
                "vocab_parallel_cross_entropy: target 10 outside the vocabulary of 10 tokens (0 to 9)");
    }
    try {
      vocab_parallel_cross_entropy(group, at::zeros({2, 4}), at::tensor({9, 1}, at::kLong), -100, 10);
      ADD_FAILURE() << "a part of 4 columns accepted for V = 10 on 4 ranks";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()),
                "vocab_parallel_cross_entropy: a logits part of 4 columns; a vocabulary of 10 tokens on 4 tensor "
                "ranks is cut into parts of 3");
    }
    EXPECT_THROW(vocab_parallel_cross_entropy(group, logits, at::tensor({1}, at::kLong), -100, 10),
                 std::invalid_argument);
  });
}

}  // namespace
}  // namespace distlab::tensor_parallel
