// The vocabulary-parallel embedding and cross-entropy (vocab.hpp) against
// PyTorch's own unsplit computation, on every rank of the group:
//
//   embedding*        VocabParallelEmbedding cut from a (V, 6) table against
//                     at::embedding of the whole table on (S=12, B=2)
//                     tokens: the output (sequence parallel: my rows of it),
//                     the gradient of my rows of the table (padding rows: 0),
//                     and the table gathered back by full_weight(), which
//                     must be the same bytes (its difference counts too).
//   cross_entropy*    vocab_parallel_cross_entropy of each rank's own random
//                     logit columns against at::cross_entropy_loss (mean,
//                     ignore_index -100) of the logits gathered from every
//                     rank with gather_parts: the loss, and the gradient of
//                     my columns. Padding columns hold a large logit (25),
//                     so a padding column counted in the softmax would show.
//
// V = 12 splits among t = 1-4; V = 10 does not on 3 and 4 ranks (padded:
// parts of 4 and 3 rows). The all-ignored batch expects what
// at::cross_entropy_loss gives: a NaN loss and a zero gradient.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "checks.hpp"
#include "tensor_parallel/naive.hpp"
#include "tensor_parallel/vocab.hpp"

namespace distlab::tensor_parallel::testing {
namespace {

constexpr int64_t kSeq = 12, kBatch = 2, kHidden = 6, kRows = 16, kIgnore = -100;

at::Generator seeded(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

// |a - b| of two scalars, where NaN equals only NaN.
double scalar_difference(const at::Tensor& a, const at::Tensor& b) {
  const double x = a.item<double>(), y = b.item<double>();
  if (std::isnan(x) || std::isnan(y))
    return std::isnan(x) && std::isnan(y) ? 0 : std::numeric_limits<double>::infinity();
  return std::abs(x - y);
}

// My rows (dim 0) or columns (dim 1) of `whole`, padded with zeros past the vocabulary.
at::Tensor my_padded_part(const at::Tensor& whole, int64_t dim, const VocabPart& part) {
  std::vector<int64_t> sizes = whole.sizes().vec();
  sizes[dim] = part.rows;
  at::Tensor out = at::zeros(sizes, whole.options());
  if (part.tokens > 0) out.narrow(dim, 0, part.tokens).copy_(whole.narrow(dim, part.first, part.tokens));
  return out;
}

double check_embedding(comm::Communicator& group, int64_t vocab, bool sequence_parallel) {
  const at::Tensor table = at::randn({vocab, kHidden}, seeded(21));
  at::Tensor tokens = at::randint(vocab, {kSeq, kBatch}, seeded(22));
  tokens[0][0] = vocab - 1;  // the last rank's last token, next to its padding
  tokens[1][1] = vocab - 1;  // twice: its gradient row is a sum
  const at::Tensor probe = at::randn({kSeq, kBatch, kHidden}, seeded(23));

  at::Tensor w = table.clone().requires_grad_(true);
  const at::Tensor y_ref = at::embedding(w, tokens);
  (y_ref * probe).sum().backward();

  VocabParallelEmbedding embedding(group, table, ParallelOptions{sequence_parallel});
  auto mine = [&](const at::Tensor& whole) { return sequence_parallel ? my_sequence_rows(group, whole) : whole; };
  const at::Tensor y = embedding(tokens);
  (y * mine(probe)).sum().backward();

  return worst_of({largest_difference(y, mine(y_ref.detach())),
                   largest_difference(embedding->weight.grad(), my_padded_part(w.grad(), 0, embedding->part())),
                   largest_difference(embedding->full_weight(), table)});
}

enum class Ignored { kSome, kAll };

double check_cross_entropy(comm::Communicator& group, int64_t vocab, Ignored ignored, bool name_vocab) {
  const VocabPart part = vocab_part(vocab, group.size(), group.rank());
  at::Tensor logits = at::randn({kRows, part.rows}, seeded(100 + group.rank())) * 3;
  if (part.tokens < part.rows) logits.narrow(1, part.tokens, part.rows - part.tokens).fill_(25);
  at::Tensor targets = at::randint(vocab, {kRows}, seeded(31));
  targets[0] = vocab - 1;
  targets[1] = 0;
  if (ignored == Ignored::kAll)
    targets.fill_(kIgnore);
  else
    for (int64_t i : {2, 7, 8}) targets[i] = kIgnore;

  // The reference: the whole logits gathered, padding columns dropped.
  at::Tensor whole = gather_parts(group, logits, 1).narrow(1, 0, vocab).clone().requires_grad_(true);
  const at::Tensor loss_ref = at::cross_entropy_loss(whole, targets, {}, at::Reduction::Mean, kIgnore);
  loss_ref.backward();

  at::Tensor x = logits.clone().requires_grad_(true);
  const at::Tensor loss = vocab_parallel_cross_entropy(group, x, targets, kIgnore, name_vocab ? vocab : 0);
  loss.backward();
  return worst_of({scalar_difference(loss, loss_ref),
                   largest_difference(x.grad(), my_padded_part(whole.grad(), 1, part))});
}

}  // namespace

std::vector<Check> vocab_checks() {
  auto any = [](int) { return true; };
  auto rows_split = [](int t) { return kSeq % t == 0; };
  return {
      {"embedding", 1e-6, [](comm::Communicator& g) { return check_embedding(g, 12, false); }, any},
      {"embedding_sp", 1e-6, [](comm::Communicator& g) { return check_embedding(g, 12, true); }, rows_split},
      {"embedding_v10", 1e-6, [](comm::Communicator& g) { return check_embedding(g, 10, false); }, any},
      {"embedding_v10_sp", 1e-6, [](comm::Communicator& g) { return check_embedding(g, 10, true); }, rows_split},
      {"cross_entropy", 1e-5,
       [](comm::Communicator& g) { return check_cross_entropy(g, 12, Ignored::kSome, false); }, any},
      {"cross_entropy_v10", 1e-5,
       [](comm::Communicator& g) { return check_cross_entropy(g, 10, Ignored::kSome, true); }, any},
      {"cross_entropy_all_ignored", 1e-5,
       [](comm::Communicator& g) { return check_cross_entropy(g, 10, Ignored::kAll, true); }, any},
  };
}

}  // namespace distlab::tensor_parallel::testing
