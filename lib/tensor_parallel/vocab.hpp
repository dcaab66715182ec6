// The two ends of a language model split over the vocabulary (Megatron-LM,
// Shoeybi et al. 2019, section 3): the input embedding and the
// cross-entropy of the output logits, neither of which ever holds the whole
// vocabulary on one rank.
//
// The cut. A vocabulary of V tokens among a tensor group of t ranks: every
// rank holds c = ceil(V/t) rows, rank r rows [r c, (r+1) c). When t does not
// divide V the table is padded to t c rows with zero rows that no token maps
// to (V = 10, t = 4: ranks hold tokens 0-2, 3-5, 6-8 and 9 plus two padding
// rows). Padding rather than a shorter last part keeps every part the same
// shape: the parts gather with the collectives' equal chunks, and the output
// layer, a ColumnParallelLinear over t c features (or the embedding's own
// table, tied), splits evenly. Megatron pads the same way (to a multiple of
// 128 t, for its kernels; here the least padding that splits). The padding
// rows are never looked up (tokens at or past V are refused), so their
// gradient stays 0; full_weight() drops them again, so cutting a table and
// gathering it back gives the same bytes.
//
// VocabParallelEmbedding. y = E[token] is a sum over ranks of "my rows of E
// if the token is mine, else 0": each rank looks its tokens up in its part
// (a token outside my range is looked up as row 0 of my part and its output
// zeroed), then g (reduce_from_region) sums the parts; every token's vector
// comes from exactly one rank, so the sum is exact. With sequence
// parallelism the sum is reduce_scatter_to_sequence_region instead: this rank gets its rows
// of the sequence, the input of the layers that follow. Backward: g is the
// identity (with sequence parallelism: the all-gather of the sequence), and
// the lookup's gradient lands on my rows only, the rows of the unsplit
// table's gradient that I own.
//
// vocab_parallel_cross_entropy. For row i with logits x_i and target t_i,
//
//   loss_i = log sum_j exp(x_ij) - x_i,t_i
//          = log sum_j exp(x_ij - m_i) - (x_i,t_i - m_i),   m_i = max_j x_ij,
//
// and every sum and max over j is a sum or max over the ranks of the same
// over their columns. So without gathering the N x V logits:
//
//   1. m_i: the max of my columns, all-reduced with max;
//   2. s_i = sum of exp(x_ij - m_i) over my columns, and z_i = x_i,t_i - m_i
//      from the one rank owning column t_i (0 from the others): one
//      all-reduce (sum) of the 2N numbers [s, z];
//   3. loss = mean over the non-ignored rows of log s_i - z_i, as
//      at::cross_entropy_loss (F.cross_entropy) with its mean reduction
//      and ignore_index.
//
// Two all-reduces of N and 2N numbers instead of an all-gather of N V (the
// target's logit rides with the sums: the same numbers as three
// all-reduces, one round of messages fewer). The max is DistLab's own
// all-reduce with ReduceOp::kMax (lib/collectives combine max as they do
// sums). The gradient of the loss with respect to my column j of row i is
// (softmax_ij - [j == t_i]) / n, n the count of non-ignored rows (ignored
// rows: 0), with softmax_ij = exp(x_ij - m_i) / s_i known from the
// forward: backward needs no communication. Padding columns are left out of
// the max and the sums (their logits are whatever the output layer made of
// a zero row) and get a zero gradient.
//
// A batch whose targets are all ignored gives what at::cross_entropy_loss
// gives: a loss of NaN (the mean of no rows, 0/0), and a zero gradient.
//
// Tokens and targets are whole and the same on every rank of the group (as
// each rank of a tensor group reads the same batch), so a refusal of a bad
// token is made by every rank before any communication.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "tensor_parallel/linear.hpp"
#include "tensor_parallel/regions.hpp"

namespace distlab::tensor_parallel {

// Rank `rank`'s part of a vocabulary of `vocab` tokens cut among `ranks`.
struct VocabPart {
  int64_t first;   // rank * rows: the first token of my rows
  int64_t rows;    // ceil(vocab / ranks), the same on every rank
  int64_t tokens;  // how many of my rows are tokens (the rest padding): clamp(vocab - first, 0, rows)
};
// Throws std::invalid_argument for an empty vocabulary or group.
VocabPart vocab_part(int64_t vocab, int ranks, int rank);

class VocabParallelEmbeddingImpl : public torch::nn::Module {
 public:
  // `full_weight` (V, h): the unsplit table, the same on every rank; this
  // rank keeps a copy of its rows, padded with zero rows past V.
  VocabParallelEmbeddingImpl(Communicator& group, const at::Tensor& full_weight, ParallelOptions options = {});
  // tokens (S, ...) of int64 in [0, V), the same on every rank ->
  // (S, ..., h) whole (sequence parallel: (S/t, ..., h), my rows).
  // Throws std::invalid_argument naming a token outside [0, V).
  at::Tensor forward(const at::Tensor& tokens);
  // The unsplit (V, h) table, gathered from every rank (a collective).
  at::Tensor full_weight();

  int64_t vocab_size() const { return vocab_; }
  const VocabPart& part() const { return part_; }

  at::Tensor weight;  // (ceil(V/t), h)

 private:
  Communicator& group_;
  ParallelOptions options_;
  int64_t vocab_;
  VocabPart part_;
};
TORCH_MODULE(VocabParallelEmbedding);

// This rank's addend of the embedding before the parts are summed: row
// token - first of `weight_part` for the tokens in [first, first + rows),
// zeros for the others. No communication.
at::Tensor masked_lookup(const at::Tensor& weight_part, const at::Tensor& tokens, int64_t first);

// The mean cross-entropy of logits split by columns across `group`:
// logits_part (N, c) holds columns [r c, (r+1) c) of the (N, V) logits (the
// output of a ColumnParallelLinear over the vocabulary), targets (N) int64,
// whole on every rank, each in [0, V) or ignore_index. `vocab_size` V is
// needed only when the columns are padded (t does not divide V); 0 means
// t c, every column a token. Returns the loss (a scalar, the same on every
// rank; NaN when every target is ignored); its gradient reaches
// logits_part. Throws std::invalid_argument for shapes that do not fit
// (naming them) or a target outside the vocabulary.
at::Tensor vocab_parallel_cross_entropy(Communicator& group, const at::Tensor& logits_part, const at::Tensor& targets,
                                        int64_t ignore_index = -100, int64_t vocab_size = 0);

}  // namespace distlab::tensor_parallel
