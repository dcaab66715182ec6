// The DDP + Pipe tutorial's data pipeline (its "Load and batch data"):
//
//   data_process: tokenize each line, look the tokens up, drop lines with no
//                 tokens, concatenate            -> (T,) int64 token stream
//   batchify:     cut the stream into bsz equal columns, dropping the
//                 T % bsz tokens left over       -> (T / bsz, bsz)
//   get_batch:    rows i .. i+seq_len of that matrix as input, the same rows
//                 shifted down by one as targets, seq_len = min(bptt, rows - 1 - i)
//
// Alphabet, bsz 4 (the tutorial's picture): columns A-F, G-L, M-R, S-X, so
// rows AGMS, BHNT, ... FLRX; Y and Z are dropped. Each column is an independent stream: the model never
// learns that G follows F.
//
// Everything here stays on the CPU (the tutorial's batchify ends with
// .to(device)): the trainer moves each batch to its rank's device.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/vocab.hpp"

namespace distlab::data {

inline constexpr int64_t kBptt = 35;

// (T,) int64: every line's tokens through `vocab`, empty lines contributing
// nothing (the tutorial filters out empty tensors before torch.cat).
at::Tensor data_process(const std::vector<std::string>& lines, const Vocab& vocab);

// (T / bsz, bsz): column j holds stream[j * T/bsz, (j+1) * T/bsz).
// Throws DataError if the stream is shorter than bsz.
at::Tensor batchify(const at::Tensor& stream, int64_t bsz);

// How the training matrix is shared among data-parallel replicas.
//
// kRows is the tutorial's code: after batchify, replica r keeps the rows
// [r * R/n, (r+1) * R/n) (R rows, n replicas, the remainder dropped), so
// every replica has all bsz columns over its own stretch of time steps and
// a step processes n * bsz sequences in all, as DDP means a per-process batch.
//
// kColumns gives replica r a contiguous run of the columns of all rows
// (replica_columns: bsz/n each, the first bsz % n one more): the replicas
// together see exactly the batches one process would see with batch bsz, so
// a run on n replicas can be compared step for step with an unsplit
// single-process run, and a job that goes on with fewer replicas still
// trains on the same batches (unevenly split: the trainer weights each
// replica's gradient by its share, pipeline/executor.hpp's gradient_scale).
enum class ReplicaSplit { kRows, kColumns };

struct ColumnRange {
  int64_t offset = 0;
  int64_t count = 0;
};
// Replica r's columns of bsz under kColumns. Throws DataError when bsz < n
// (a replica would get none).
ColumnRange replica_columns(int64_t bsz, int64_t replica, int64_t num_replicas);

at::Tensor shard_for_replica(const at::Tensor& batched, int64_t replica, int64_t num_replicas,
                             ReplicaSplit how = ReplicaSplit::kRows);

// The tutorial's batchify(data, bsz, rank, world_size, is_train): the split
// among replicas (kRows) applies to training data only.
at::Tensor batchify(const at::Tensor& stream, int64_t bsz, int64_t replica, int64_t num_replicas,
                    bool is_train);

struct Batch {
  at::Tensor data;     // (N, S): source rows i .. i+S transposed, batch first
  at::Tensor targets;  // (S * N,): source rows i+1 .. i+1+S flattened time-major (s, n)
};

// The tutorial's get_batch(source, i). Note the orders: data is batch-major
// (the pipeline splits microbatches along dim 0) while targets stay
// time-major, target[s * N + n] = source[i + 1 + s][n].
Batch get_batch(const at::Tensor& source, int64_t i, int64_t bptt = kBptt);

// targets reordered batch-major, target[n * S + s] = source[i + 1 + s][n]:
// the order of a (N, S, ntokens) output viewed as (N * S, ntokens).
at::Tensor batch_major_targets(const Batch& batch);

// Starting rows of the batches of one epoch: 0, bptt, 2 bptt, ... < rows - 1,
// at most max_batches of them (the tutorial trains 50 batches per epoch);
// max_batches < 0 means all.
std::vector<int64_t> batch_starts(const at::Tensor& source, int64_t bptt = kBptt, int64_t max_batches = -1);

}  // namespace distlab::data
