// Which layouts `--measure K` runs, and running them: the first K of the
// predicted ranking and K others drawn at random from the rest (a seeded
// draw, so a run can be made again), each run for real (measure.hpp) in
// the ranking's order. distlab-plan and distlab-bench plan share both.
#pragma once

#include <cstdio>
#include <functional>
#include <vector>

#include "measure.hpp"
#include "table.hpp"

namespace distlab::planner {

// The preset's shape on the corpus's vocabulary (or `vocab`) with the
// corpus's split sizes (`data`: its folder, "" for the default); `vocab`
// without `data` reads no corpus, and the data the ranks hold is not counted.
ModelShape model_on_corpus(const std::string& preset, int64_t vocab, const std::string& data);

// Indices into a ranking of `layouts`, ascending.
std::vector<size_t> choose_to_measure(size_t layouts, int k, unsigned seed);

// What measure_layouts calls after each run: the rows so far and a line.
using LayoutDone = std::function<void(const std::vector<MeasuredRow>&, const std::string&)>;
// A LayoutDone that prints each line to `out` at once (indented), then
// calls `then` with the rows so far (when given).
LayoutDone print_each(std::FILE* out, std::function<void(const std::vector<MeasuredRow>&)> then = {});

// Runs ranked[i] for each chosen i. With `fail_one`, the first is run a
// second time made to fail on purpose (--chunks 0, which lesson 11
// refuses), to show the runs go on past a failure. `done` is called after
// each run with the rows so far and a line saying how it went.
std::vector<MeasuredRow> measure_layouts(const std::vector<Ranked>& ranked, const std::vector<size_t>& chosen,
                                         const MeasureOptions& options, bool fail_one, const LayoutDone& done);

}  // namespace distlab::planner
