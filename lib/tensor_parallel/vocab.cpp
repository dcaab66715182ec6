// The vocabulary-parallel embedding and cross-entropy; the cut, the math and
// the choices are explained in vocab.hpp.
#include "tensor_parallel/vocab.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "collectives/collectives.hpp"
#include "tensor_parallel/naive.hpp"

namespace distlab::tensor_parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::string str(int64_t v) { return std::to_string(v); }

// The first entry of `values` where `bad` holds, as a number (for refusals).
int64_t first_bad(const at::Tensor& values, const at::Tensor& bad) {
  return values.masked_select(bad).select(0, 0).item<int64_t>();
}

// Refuses, on every rank alike (the tokens are the same on all), tokens that
// are no row of the vocabulary; `skip` masks entries that are not tokens.
void check_in_vocabulary(const std::string& who, const char* what, const at::Tensor& values, int64_t vocab,
                         const at::Tensor& skip = at::Tensor()) {
  if (!at::isIntegralType(values.scalar_type(), /*includeBool=*/false))
    throw std::invalid_argument(who + ": " + what + "s of type " + std::string(c10::toString(values.scalar_type())) +
                                "; expected integers (int64)");
  at::Tensor bad = (values < 0).logical_or(values >= vocab);
  if (skip.defined()) bad = bad.logical_and(skip.logical_not());
  if (!bad.any().item<bool>()) return;
  throw std::invalid_argument(who + ": " + what + " " + str(first_bad(values, bad)) + " outside the vocabulary of " +
                              str(vocab) + " tokens (0 to " + str(vocab - 1) + ")");
}

// The cross-entropy as one autograd function; `first` and `tokens` say which
// columns of the logits this rank holds (vocab_part), the columns past
// `tokens` being padding.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& targets,
                            Communicator* comm, int64_t first, int64_t tokens, int64_t ignore_index) {
    const int64_t n = logits.size(0), columns = logits.size(1);
    at::Tensor x = logits.contiguous();
    if (tokens < columns) {  // padding: out of the max, exp() = 0 in the sums
      x = x.clone();
      x.narrow(1, tokens, columns - tokens).fill_(-std::numeric_limits<double>::infinity());
    }
    // 1. The row maxima over every rank's columns.
    const at::Tensor my_max = std::get<0>(x.max(1)).contiguous();
    at::Tensor row_max = at::empty_like(my_max);
    collectives::all_reduce(*comm, my_max, row_max, comm::ReduceOp::kMax);
    const at::Tensor exp = (x - row_max.unsqueeze(1)).exp_();
    // 2. [sum of exp, the target's shifted logit], summed over the ranks in one
    //    all-reduce: only the rank owning the target's column adds a logit.
    const at::Tensor valid = targets != ignore_index;
    const at::Tensor mine = valid.logical_and(targets >= first).logical_and(targets < first + tokens);
    const at::Tensor column = (targets - first).masked_fill(mine.logical_not(), 0);
    at::Tensor parts = at::empty({2, n}, x.options());
    parts[0].copy_(exp.sum(1));
    parts[1].copy_((x.gather(1, column.unsqueeze(1)).squeeze(1) - row_max).masked_fill(mine.logical_not(), 0));
    at::Tensor sums = at::empty_like(parts);
    collectives::all_reduce(*comm, parts, sums, comm::ReduceOp::kSum);
    // 3. The mean over the rows that count (0 / 0 = NaN when none does).
    const at::Tensor per_row = (sums[0].log() - sums[1]).masked_fill(valid.logical_not(), 0);
    const int64_t count = valid.sum().item<int64_t>();
    ctx->saved_data["count"] = count;
    ctx->save_for_backward({exp.div_(sums[0].unsqueeze(1)), column, mine, valid});  // exp is now softmax
    return per_row.sum() / static_cast<double>(count);
  }

  // (softmax - one-hot(target)) * grad / count on my columns, 0 on ignored rows.
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &softmax = saved[0], &column = saved[1], &mine = saved[2], &valid = saved[3];
    const int64_t count = ctx->saved_data["count"].toInt();
    at::Tensor g = at::zeros_like(softmax);
    if (count > 0) {
      g = softmax.clone();
      g.scatter_add_(1, column.unsqueeze(1), mine.to(g.scalar_type()).neg().unsqueeze(1));
      g.masked_fill_(valid.logical_not().unsqueeze(1), 0);
      g.mul_(grad.at(0) / static_cast<double>(count));
    }
    return {g, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

VocabPart vocab_part(int64_t vocab, int ranks, int rank) {
  if (ranks < 1) throw std::invalid_argument("vocabulary parallelism: a tensor group of " + str(ranks) + " ranks");
  if (vocab < 1) throw std::invalid_argument("vocabulary parallelism: a vocabulary of " + str(vocab) + " tokens");
  const int64_t rows = (vocab + ranks - 1) / ranks;
  const int64_t first = rank * rows;
  return {first, rows, std::clamp<int64_t>(vocab - first, 0, rows)};
}

at::Tensor masked_lookup(const at::Tensor& weight_part, const at::Tensor& tokens, int64_t first) {
  const at::Tensor outside = (tokens < first).logical_or(tokens >= first + weight_part.size(0));
  const at::Tensor local = (tokens - first).masked_fill(outside, 0);  // row 0 of my part stands in
  return at::embedding(weight_part, local).masked_fill(outside.unsqueeze(-1), 0);
}

VocabParallelEmbeddingImpl::VocabParallelEmbeddingImpl(Communicator& group, const at::Tensor& full_weight,
                                                       ParallelOptions options)
    : group_(group), options_(options), vocab_(full_weight.dim() == 2 ? full_weight.size(0) : 0) {
  if (full_weight.dim() != 2)
    throw std::invalid_argument("VocabParallelEmbedding: a table of " + str(full_weight.dim()) +
                                " dimensions; expected (vocabulary, hidden)");
  part_ = vocab_part(vocab_, group.size(), group.rank());
  at::Tensor rows = at::zeros({part_.rows, full_weight.size(1)}, full_weight.options());
  if (part_.tokens > 0)
    rows.narrow(0, 0, part_.tokens).copy_(full_weight.detach().narrow(0, part_.first, part_.tokens));
  weight = register_parameter("weight", rows);
}

at::Tensor VocabParallelEmbeddingImpl::forward(const at::Tensor& tokens) {
  check_in_vocabulary("VocabParallelEmbedding", "token", tokens, vocab_);
  const at::Tensor partial = masked_lookup(weight, tokens, part_.first);
  return options_.sequence_parallel ? reduce_scatter_to_sequence_region(group_, partial) : reduce_from_region(group_, partial);
}

at::Tensor VocabParallelEmbeddingImpl::full_weight() {
  return gather_parts(group_, weight, 0).narrow(0, 0, vocab_).clone();
}

at::Tensor vocab_parallel_cross_entropy(Communicator& group, const at::Tensor& logits_part, const at::Tensor& targets,
                                        int64_t ignore_index, int64_t vocab_size) {
  const std::string who = "vocab_parallel_cross_entropy";
  if (logits_part.dim() != 2 || targets.dim() != 1 || targets.size(0) != logits_part.size(0))
    throw std::invalid_argument(who + ": logits of shape " + c10::str(logits_part.sizes()) + " and targets of shape " +
                                c10::str(targets.sizes()) + "; expected (N, columns) and (N)");
  const int64_t columns = logits_part.size(1);
  const int64_t vocab = vocab_size > 0 ? vocab_size : columns * group.size();
  const VocabPart part = vocab_part(vocab, group.size(), group.rank());
  if (part.rows != columns)
    throw std::invalid_argument(who + ": a logits part of " + str(columns) + " columns; a vocabulary of " + str(vocab) +
                                " tokens on " + str(group.size()) + " tensor ranks is cut into parts of " +
                                str(part.rows));
  check_in_vocabulary(who, "target", targets, vocab, targets == ignore_index);
  return VocabParallelCrossEntropy::apply(logits_part, targets.to(at::kLong), &group, part.first, part.tokens,
                                          ignore_index);
}

}  // namespace distlab::tensor_parallel
