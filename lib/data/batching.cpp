#include "data/batching.hpp"

#include <algorithm>

#include "data/errors.hpp"
#include "data/tokenizer.hpp"

namespace distlab::data {
namespace {

void check_matrix(const at::Tensor& t, const char* what) {
  if (t.dim() != 2) {
    throw DataError(std::string(what) + ": expected a batchified (rows, bsz) tensor, got " +
                    std::to_string(t.dim()) + " dimensions");
  }
}

}  // namespace

at::Tensor data_process(const std::vector<std::string>& lines, const Vocab& vocab) {
  std::vector<int64_t> ids;
  for (const std::string& line : lines) {
    for (const std::string& token : basic_english_tokenize(line)) ids.push_back(vocab.index(token));
  }
  return at::tensor(ids, at::kLong);
}

at::Tensor batchify(const at::Tensor& stream, int64_t bsz) {
  if (stream.dim() != 1) throw DataError("batchify: expected a 1-D token stream, got " + std::to_string(stream.dim()) + " dimensions");
  if (bsz <= 0) throw DataError("batchify: batch size must be positive, got " + std::to_string(bsz));
  const int64_t nbatch = stream.size(0) / bsz;
  if (nbatch == 0) {
    throw DataError("batchify: " + std::to_string(stream.size(0)) + " tokens cannot fill " +
                    std::to_string(bsz) + " columns (hint: a smaller batch size or a bigger split)");
  }
  // (bsz, nbatch) row-major puts consecutive tokens along a row; transposing
  // makes each of those rows a column of the (nbatch, bsz) result.
  return stream.narrow(0, 0, nbatch * bsz).view({bsz, nbatch}).t().contiguous();
}

at::Tensor shard_for_replica(const at::Tensor& batched, int64_t replica, int64_t num_replicas,
                             ReplicaSplit how) {
  check_matrix(batched, "shard_for_replica");
  if (num_replicas <= 0 || replica < 0 || replica >= num_replicas) {
    throw DataError("shard_for_replica: replica " + std::to_string(replica) + " is outside [0, " +
                    std::to_string(num_replicas) + ")");
  }
  if (how == ReplicaSplit::kRows) {
    const int64_t per = batched.size(0) / num_replicas;
    if (per < 2) {
      throw DataError("shard_for_replica: " + std::to_string(batched.size(0)) + " rows give each of " +
                      std::to_string(num_replicas) + " replicas fewer than 2 rows (one input and its target)");
    }
    return batched.narrow(0, replica * per, per).contiguous();
  }
  const ColumnRange mine = replica_columns(batched.size(1), replica, num_replicas);
  return batched.narrow(1, mine.offset, mine.count).contiguous();
}

ColumnRange replica_columns(int64_t bsz, int64_t replica, int64_t num_replicas) {
  if (num_replicas <= 0 || replica < 0 || replica >= num_replicas)
    throw DataError("replica_columns: replica " + std::to_string(replica) + " is outside [0, " +
                    std::to_string(num_replicas) + ")");
  if (bsz < num_replicas)
    throw DataError("replica_columns: " + std::to_string(bsz) + " columns leave some of " +
                    std::to_string(num_replicas) + " replicas without any (hint: a batch size of at least " +
                    std::to_string(num_replicas) + ")");
  const int64_t per = bsz / num_replicas, extra = bsz % num_replicas;
  return {replica * per + std::min(replica, extra), per + (replica < extra ? 1 : 0)};
}

at::Tensor batchify(const at::Tensor& stream, int64_t bsz, int64_t replica, int64_t num_replicas,
                    bool is_train) {
  at::Tensor batched = batchify(stream, bsz);
  if (!is_train) return batched;
  return shard_for_replica(batched, replica, num_replicas, ReplicaSplit::kRows);
}

Batch get_batch(const at::Tensor& source, int64_t i, int64_t bptt) {
  check_matrix(source, "get_batch");
  const int64_t rows = source.size(0);
  if (i < 0 || i >= rows - 1) {
    throw DataError("get_batch: start row " + std::to_string(i) + " leaves no target in a source of " +
                    std::to_string(rows) + " rows (valid starts: 0 .. " + std::to_string(rows - 2) + ")");
  }
  const int64_t seq_len = std::min(bptt, rows - 1 - i);
  Batch batch;
  batch.data = source.narrow(0, i, seq_len).t();
  batch.targets = source.narrow(0, i + 1, seq_len).reshape({-1});
  return batch;
}

at::Tensor batch_major_targets(const Batch& batch) {
  const int64_t n = batch.data.size(0);
  const int64_t s = batch.data.size(1);
  return batch.targets.view({s, n}).t().reshape({-1});
}

std::vector<int64_t> batch_starts(const at::Tensor& source, int64_t bptt, int64_t max_batches) {
  check_matrix(source, "batch_starts");
  int64_t end = source.size(0) - 1;
  if (max_batches >= 0) end = std::min(end, max_batches * bptt);  // the tutorial's min(50 * bptt, rows - 1)
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < end; i += bptt) starts.push_back(i);
  return starts;
}

}  // namespace distlab::data
