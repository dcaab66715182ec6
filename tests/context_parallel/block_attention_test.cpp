// Attention computed block by block and merged (context_parallel/
// block_attention.hpp) against PyTorch's own softmax over the whole
// sequence: the output and the row's log-sum-exp, causal and not, with the
// keys cut into blocks in order, out of order, and by the zigzag layout's
// positions; rows a block does not see; the naive merge's overflow.
#include <gtest/gtest.h>
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "context_checks.hpp"
#include "context_parallel/block_attention.hpp"
#include "support/differences.hpp"

namespace distlab::context_parallel {
namespace {

using test_support::largest_difference;

constexpr double kTolerance = 2e-6;

struct Whole {
  at::Tensor out, lse;
};

// The reference: at::softmax over every key at once, -inf where a key lies
// after the query (when positions are given).
Whole reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                const at::Tensor& q_pos = {}, const at::Tensor& k_pos = {}) {
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  if (q_pos.defined())
    scores = scores.masked_fill(k_pos.unsqueeze(0) > q_pos.unsqueeze(1), -std::numeric_limits<float>::infinity());
  return {at::matmul(at::softmax(scores, -1), v), at::logsumexp(scores, -1)};
}

using testing::seeded;

// Merges the blocks of keys given by `pieces` (index lists into the keys).
BlockResult blockwise(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                      const std::vector<at::Tensor>& pieces, const at::Tensor& q_pos = {},
                      const at::Tensor& k_pos = {}) {
  BlockResult acc;
  for (const at::Tensor& index : pieces) {
    const at::Tensor kb = k.index_select(-2, index), vb = v.index_select(-2, index);
    merge_into(acc, block_attention(q, kb, vb, scale, q_pos, k_pos.defined() ? k_pos.index_select(0, index) : k_pos));
  }
  return acc;
}

std::vector<at::Tensor> contiguous_pieces(int64_t length, int blocks) {
  std::vector<at::Tensor> pieces;
  for (const at::Tensor& p : at::arange(length, at::kLong).chunk(blocks)) pieces.push_back(p);
  return pieces;
}

TEST(BlockAttention, BlocksMergedEqualTheWholeSoftmax) {
  const at::Tensor q = seeded({2, 3, 8, 16}, 1), k = seeded({2, 3, 12, 16}, 2), v = seeded({2, 3, 12, 16}, 3);
  const double scale = 1.0 / std::sqrt(16.0);
  const Whole whole = reference(q, k, v, scale);
  for (int blocks : {1, 2, 3, 4, 12}) {
    const BlockResult got = blockwise(q, k, v, scale, contiguous_pieces(12, blocks));
    EXPECT_LE(largest_difference(got.out, whole.out), kTolerance) << blocks << " blocks";
    EXPECT_LE(largest_difference(got.lse, whole.lse), kTolerance) << blocks << " blocks";
  }
  // The order of the blocks does not matter (a ring brings them in another order on each rank).
  std::vector<at::Tensor> reversed = contiguous_pieces(12, 4);
  std::reverse(reversed.begin(), reversed.end());
  const BlockResult got = blockwise(q, k, v, scale, reversed);
  EXPECT_LE(largest_difference(got.out, whole.out), kTolerance);
}

// Causal, with the sequence cut as zigzag cuts it for C = 2: chunks 0..3,
// rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2. Rank 0's queries
// against rank 1's keys: the early chunk sees none of them, the late one all.
TEST(BlockAttention, CausalBlocksFollowEachTokensPosition) {
  const int64_t S = 16, chunk = 4;
  const at::Tensor q = seeded({1, 2, S, 8}, 4), k = seeded({1, 2, S, 8}, 5), v = seeded({1, 2, S, 8}, 6);
  const at::Tensor all = at::arange(S, at::kLong);
  const Whole whole = reference(q, k, v, 0.5, all, all);
  const at::Tensor rank0 = at::cat({all.narrow(0, 0, chunk), all.narrow(0, 3 * chunk, chunk)});
  const at::Tensor rank1 = at::cat({all.narrow(0, chunk, chunk), all.narrow(0, 2 * chunk, chunk)});
  for (const at::Tensor& mine : {rank0, rank1}) {
    const at::Tensor q_mine = q.index_select(-2, mine);
    const BlockResult got = blockwise(q_mine, k, v, 0.5, {rank1, rank0}, mine, all);
    EXPECT_LE(largest_difference(got.out, whole.out.index_select(-2, mine)), kTolerance);
    EXPECT_LE(largest_difference(got.lse, whole.lse.index_select(-1, mine)), kTolerance);
  }
  // Rank 0's first chunk against rank 1's keys: every key lies after every query.
  const BlockResult none = block_attention(q.index_select(-2, rank0), k.index_select(-2, rank1),
                                           v.index_select(-2, rank1), 0.5, rank0, rank1);
  const at::Tensor early = none.lse.narrow(-1, 0, chunk);
  EXPECT_TRUE(at::isneginf(early).all().item<bool>()) << early;
  EXPECT_EQ(none.out.narrow(-2, 0, chunk).abs().max().item<float>(), 0.0f);
  EXPECT_TRUE(at::isfinite(none.lse.narrow(-1, chunk, chunk)).all().item<bool>());
}

TEST(BlockAttention, AnEmptyBlockFirstOrLastChangesNothing) {
  const at::Tensor q = seeded({1, 1, 4, 8}, 7), k = seeded({1, 1, 8, 8}, 8), v = seeded({1, 1, 8, 8}, 9);
  const at::Tensor q_pos = at::arange(4, at::kLong), k_pos = at::arange(8, at::kLong);
  const Whole whole = reference(q, k, v, 0.3, q_pos, k_pos);
  // Keys 4..7 lie after every query: that block gives every row nothing.
  const std::vector<at::Tensor> pieces = contiguous_pieces(8, 2);
  for (const auto& order : {pieces, std::vector<at::Tensor>{pieces[1], pieces[0]}}) {
    const BlockResult got = blockwise(q, k, v, 0.3, order, q_pos, k_pos);
    EXPECT_LE(largest_difference(got.out, whole.out), kTolerance);
    EXPECT_LE(largest_difference(got.lse, whole.lse), kTolerance);
  }
}

// Logits around 100: exp overflows float32 (above about 88.7), so the naive
// merge gives NaN; the stable one equals the whole softmax.
TEST(BlockAttention, TheStableMergeStaysFiniteWhereTheNaiveOneOverflows) {
  const at::Tensor q = seeded({1, 1, 4, 8}, 10) * 6.0, k = seeded({1, 1, 8, 8}, 11) * 6.0, v = seeded({1, 1, 8, 8}, 12);
  const Whole whole = reference(q, k, v, 1.0);
  ASSERT_GT(whole.lse.max().item<float>(), 89.0f) << "the logits must be large enough to overflow exp";
  const std::vector<at::Tensor> pieces = contiguous_pieces(8, 2);
  const BlockResult a = block_attention(q, k.index_select(-2, pieces[0]), v.index_select(-2, pieces[0]), 1.0);
  const BlockResult b = block_attention(q, k.index_select(-2, pieces[1]), v.index_select(-2, pieces[1]), 1.0);
  const BlockResult naive = merge_naive(a, b);
  EXPECT_FALSE(at::isfinite(naive.out).all().item<bool>()) << "the naive merge did not overflow";
  BlockResult stable;
  merge_into(stable, a);
  merge_into(stable, b);
  EXPECT_TRUE(at::isfinite(stable.out).all().item<bool>());
  EXPECT_LE(largest_difference(stable.out, whole.out), 1e-5);
  EXPECT_LE(largest_difference(stable.lse, whole.lse), 1e-5);
  // Where exp does not overflow, both forms agree.
  const at::Tensor qs = q / 6.0, ks = k / 6.0;
  const BlockResult sa = block_attention(qs, ks.index_select(-2, pieces[0]), v.index_select(-2, pieces[0]), 1.0);
  const BlockResult sb = block_attention(qs, ks.index_select(-2, pieces[1]), v.index_select(-2, pieces[1]), 1.0);
  BlockResult small;
  merge_into(small, sa);
  merge_into(small, sb);
  EXPECT_LE(largest_difference(merge_naive(sa, sb).out, small.out), kTolerance);
}

TEST(BlockAttention, ShapesThatDoNotFitAreNamed) {
  const at::Tensor q = at::zeros({2, 4, 8}), k = at::zeros({2, 6, 8});
  EXPECT_THROW(block_attention(q, k, at::zeros({2, 6, 4}), 1.0), std::invalid_argument);
  EXPECT_THROW(block_attention(q, at::zeros({2, 6, 7}), at::zeros({2, 6, 7}), 1.0), std::invalid_argument);
  EXPECT_THROW(block_attention(q, k, k, 1.0, at::arange(4, at::kLong), {}), std::invalid_argument);
  try {
    block_attention(q, k, k, 1.0, at::arange(3, at::kLong), at::arange(6, at::kLong));
    FAIL() << "3 positions for 4 queries accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("one per query and one per key"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace distlab::context_parallel
