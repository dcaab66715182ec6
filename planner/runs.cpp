#include "runs.hpp"

#include <algorithm>
#include <random>

#include "data/corpus.hpp"

namespace distlab::planner {

ModelShape model_on_corpus(const std::string& preset, int64_t vocab, const std::string& data_folder) {
  if (vocab > 0 && data_folder.empty()) return model_shape(preset, vocab);
  const data::Corpus corpus = data::load_corpus(data_folder.empty() ? data::default_corpus_folder() : data_folder);
  ModelShape shape = model_shape(preset, vocab > 0 ? vocab : static_cast<int64_t>(corpus.vocab.size()));
  shape.train_tokens = corpus.train.numel();
  shape.valid_tokens = corpus.valid.numel();
  shape.test_tokens = corpus.test.numel();
  return shape;
}

std::vector<size_t> choose_to_measure(size_t layouts, int k, unsigned seed) {
  std::vector<size_t> chosen;
  for (size_t i = 0; i < std::min<size_t>(size_t(k), layouts); ++i) chosen.push_back(i);
  std::vector<size_t> rest;
  for (size_t i = chosen.size(); i < layouts; ++i) rest.push_back(i);
  std::mt19937 random(seed);
  std::shuffle(rest.begin(), rest.end(), random);
  for (size_t i = 0; i < std::min<size_t>(size_t(k), rest.size()); ++i) chosen.push_back(rest[i]);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

LayoutDone print_each(std::FILE* out, std::function<void(const std::vector<MeasuredRow>&)> then) {
  return [out, then = std::move(then)](const std::vector<MeasuredRow>& rows, const std::string& line) {
    std::fprintf(out, "  %s\n", line.c_str());
    std::fflush(out);
    if (then) then(rows);
  };
}

std::vector<MeasuredRow> measure_layouts(const std::vector<Ranked>& ranked, const std::vector<size_t>& chosen,
                                         const MeasureOptions& options, bool fail_one, const LayoutDone& done) {
  std::vector<MeasuredRow> rows;
  const size_t total = chosen.size() + (fail_one && !chosen.empty() ? 1 : 0);
  for (const size_t i : chosen) {
    const Ranked& r = ranked.at(i);
    rows.push_back({i + 1, r, measure(r.command, options)});
    const Measured& m = rows.back().measured;
    done(rows, std::to_string(rows.size()) + "/" + std::to_string(total) + " " + choice_name(r.choice) + ": " +
                   (m.ok ? "ran" : "failed: " + m.error));
    if (fail_one && rows.size() == 1) {
      rows.push_back({i + 1, r, measure(r.command + " --chunks 0", options)});
      done(rows, std::to_string(rows.size()) + "/" + std::to_string(total) + " " + choice_name(r.choice) +
                     " --chunks 0 (on purpose): " + (rows.back().measured.ok ? "ran" : "failed, as it should"));
    }
  }
  return rows;
}

}  // namespace distlab::planner
