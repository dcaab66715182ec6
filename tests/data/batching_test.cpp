// batchify and get_batch on the tutorial's alphabet, against values worked
// out by hand; data_process on a few lines; the split among replicas.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "data/batching.hpp"
#include "data/errors.hpp"
#include "data/tokenizer.hpp"
#include "data/vocab.hpp"

namespace distlab::data {
namespace {

// A..Z as 0..25.
at::Tensor alphabet() { return at::arange(26, at::kLong); }

std::vector<int64_t> values(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

int64_t letter(char c) { return c - 'A'; }

std::vector<int64_t> letters(const std::string& s) {
  std::vector<int64_t> out;
  for (char c : s) out.push_back(letter(c));
  return out;
}

TEST(Batchify, TutorialAlphabet) {
  // The tutorial's picture: column j is the j-th run of 6 letters, A-F, G-L,
  // M-R, S-X; Y and Z are dropped. Row r holds the r-th letter of each run.
  const at::Tensor b = batchify(alphabet(), 4);
  ASSERT_EQ(b.sizes(), (at::IntArrayRef{6, 4}));
  EXPECT_EQ(b.scalar_type(), at::kLong);
  EXPECT_TRUE(b.is_contiguous());
  EXPECT_EQ(values(b.select(1, 0)), letters("ABCDEF"));
  EXPECT_EQ(values(b.select(1, 1)), letters("GHIJKL"));
  EXPECT_EQ(values(b.select(1, 2)), letters("MNOPQR"));
  EXPECT_EQ(values(b.select(1, 3)), letters("STUVWX"));
  EXPECT_EQ(values(b), letters("AGMSBHNTCIOUDJPVEKQWFLRX"));
}

TEST(Batchify, ExactFitAndTooShort) {
  EXPECT_EQ(values(batchify(alphabet().narrow(0, 0, 24), 3)), letters("AIQBJRCKSDLTEMUFNVGOWHPX"));
  EXPECT_EQ(batchify(alphabet(), 26).sizes(), (at::IntArrayRef{1, 26}));
  EXPECT_THROW(batchify(alphabet(), 27), DataError);
  EXPECT_THROW(batchify(alphabet(), 0), DataError);
}

TEST(GetBatch, AlphabetWithBptt2) {
  const at::Tensor source = batchify(alphabet(), 4);  // 6 rows
  // i = 0: rows 0-1 are AGMS / BHNT; data is batch-first (4, 2).
  Batch first = get_batch(source, 0, 2);
  ASSERT_EQ(first.data.sizes(), (at::IntArrayRef{4, 2}));
  EXPECT_EQ(values(first.data), letters("ABGHMNST"));
  // targets: rows 1-2 (BHNT / CIOU) flattened time-major.
  EXPECT_EQ(values(first.targets), letters("BHNTCIOU"));
  EXPECT_EQ(values(batch_major_targets(first)), letters("BCHINOTU"));

  // i = 4: only row 5 remains as target, so seq_len = min(2, 6 - 1 - 4) = 1.
  Batch last = get_batch(source, 4, 2);
  EXPECT_EQ(last.data.sizes(), (at::IntArrayRef{4, 1}));
  EXPECT_EQ(values(last.data), letters("EKQW"));
  EXPECT_EQ(values(last.targets), letters("FLRX"));

  EXPECT_THROW(get_batch(source, 5, 2), DataError);  // no row after the last
  EXPECT_EQ(batch_starts(source, 2), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(batch_starts(source, 2, /*max_batches=*/2), (std::vector<int64_t>{0, 2}));
}

TEST(GetBatch, TutorialBpttOnALongerStream) {
  // 1000 tokens, batch 20: 50 rows. With bptt 35: batches at 0 (35 rows) and 35 (14 rows).
  const at::Tensor source = batchify(at::arange(1000, at::kLong), 20);
  ASSERT_EQ(source.sizes(), (at::IntArrayRef{50, 20}));
  EXPECT_EQ(batch_starts(source), (std::vector<int64_t>{0, 35}));
  const Batch b = get_batch(source, 35);
  ASSERT_EQ(b.data.sizes(), (at::IntArrayRef{20, 14}));
  // Column n is the stream from 50 n; data[n][s] = 50 n + 35 + s.
  EXPECT_EQ(b.data[3][0].item<int64_t>(), 185);
  EXPECT_EQ(b.data[19][13].item<int64_t>(), 998);
  // targets[s * 20 + n] = 50 n + 36 + s.
  EXPECT_EQ(b.targets[0].item<int64_t>(), 36);
  EXPECT_EQ(b.targets[1].item<int64_t>(), 86);
  EXPECT_EQ(b.targets[13 * 20 + 19].item<int64_t>(), 999);
}

TEST(Replicas, TutorialRowsAndColumns) {
  const at::Tensor source = batchify(alphabet(), 4);  // rows AGMS BHNT CIOU DJPV EKQW FLRX
  // The tutorial: replica r keeps rows [3 r, 3 r + 3) of all 4 columns.
  EXPECT_EQ(values(batchify(alphabet(), 4, 0, 2, /*is_train=*/true)), letters("AGMSBHNTCIOU"));
  EXPECT_EQ(values(batchify(alphabet(), 4, 1, 2, /*is_train=*/true)), letters("DJPVEKQWFLRX"));
  EXPECT_EQ(batchify(alphabet(), 4, 1, 2, /*is_train=*/false).sizes(), (at::IntArrayRef{6, 4}));
  // 6 rows among 4 replicas: 1 row each is no batch at all.
  EXPECT_THROW(shard_for_replica(source, 0, 4), DataError);
  // Columns: replica 1 of 2 keeps columns 2-3 (M-R, S-X) of every row.
  EXPECT_EQ(values(shard_for_replica(source, 1, 2, ReplicaSplit::kColumns)), letters("MSNTOUPVQWRX"));
  // 4 columns among 3 replicas: 2, 1, 1 (the first takes the remainder), together every column once.
  EXPECT_EQ(values(shard_for_replica(source, 0, 3, ReplicaSplit::kColumns)), values(source.narrow(1, 0, 2)));
  EXPECT_EQ(values(shard_for_replica(source, 2, 3, ReplicaSplit::kColumns)), values(source.narrow(1, 3, 1)));
  EXPECT_THROW(shard_for_replica(source, 0, 5, ReplicaSplit::kColumns), DataError);
  for (int64_t n = 1; n <= 7; ++n)
    for (int64_t bsz = n; bsz <= 20; ++bsz) {
      int64_t next = 0, smallest = bsz, largest = 0;
      for (int64_t r = 0; r < n; ++r) {
        const ColumnRange c = replica_columns(bsz, r, n);
        EXPECT_EQ(c.offset, next) << bsz << " columns, replica " << r << " of " << n;
        next += c.count;
        smallest = std::min(smallest, c.count);
        largest = std::max(largest, c.count);
      }
      EXPECT_EQ(next, bsz);
      EXPECT_LE(largest - smallest, 1);
      EXPECT_GE(smallest, 1);
    }
  EXPECT_THROW(shard_for_replica(source, 2, 2), DataError);
}

TEST(DataProcess, DropsEmptyLinesAndMapsUnknowns) {
  TokenCounter counter;
  counter.add(basic_english_tokenize("the cat sat . the end"));
  const Vocab vocab = Vocab::build_with_unk(counter);  // <unk> the . cat end sat
  ASSERT_EQ(vocab.itos(), (std::vector<std::string>{"<unk>", "the", ".", "cat", "end", "sat"}));
  const at::Tensor stream = data_process({" The cat ", "", "   ", " sat on the mat . "}, vocab);
  EXPECT_EQ(values(stream), (std::vector<int64_t>{1, 3, 5, 0, 1, 0, 2}));
  EXPECT_EQ(data_process({"", " "}, vocab).numel(), 0);
}

}  // namespace
}  // namespace distlab::data
