#include "collective_scene.hpp"

#include <algorithm>
#include <cmath>

namespace distlab::viz {

using collectives::Collective;
using collectives::Plan;
using collectives::Range;
using collectives::Transfer;

namespace {

collectives::Plan plan_for(const CollectiveSetup& setup, collectives::Algorithm algorithm) {
  if (setup.collective != Collective::kAllToAll)
    return collectives::make_plan(setup.collective, algorithm, setup.ranks, setup.bytes, setup.root,
                                  /*elem_bytes=*/1);
  // Equal blocks through make_plan (which also refuses an algorithm that is
  // not all-to-all's); the example's counts replace them when uneven.
  const int64_t block = std::max<int64_t>(1, setup.bytes / std::max(1, setup.ranks));
  Plan plan = collectives::make_plan(Collective::kAllToAll, algorithm, setup.ranks, block * setup.ranks, 0, 1);
  if (setup.uneven) plan = collectives::make_all_to_all_plan(uneven_counts(setup.ranks, block), setup.ranks, 1);
  return plan;
}

// all_to_all: the block of rank's input (blocks for each peer) or output
// (blocks from each peer) that element `offset` lies in; -1 when none.
int block_at(const Plan& plan, int rank, bool output, int64_t offset) {
  for (int peer = 0; peer < plan.world_size; ++peer) {
    const Range b = output ? plan.output_block(rank, peer) : plan.input_block(rank, peer);
    if (offset >= b.offset && offset < b.offset + b.count) return peer;
  }
  return -1;
}

// Replays an all_to_all plan on paper: each transfer reads a block of the
// sender's input and fills the block of the receiver's output it lands in.
void replay_all_to_all(AlgorithmRun& run) {
  const Plan& plan = run.plan;
  const int p = plan.world_size;
  std::vector<std::vector<BlockOrigin>> state(p, std::vector<BlockOrigin>(p));
  for (int r = 0; r < p; ++r)
    if (plan.output_block(r, r).count > 0) state[r][r] = {r, r};  // copied before the first step
  run.outputs.push_back(state);
  for (const collectives::Step& step : plan.steps) {
    for (const Transfer& t : step.transfers) {
      const int from = block_at(plan, t.dst, /*output=*/true, t.landing().offset);
      if (from >= 0) state[t.dst][from] = {t.src, block_at(plan, t.src, /*output=*/false, t.range.offset)};
    }
    run.outputs.push_back(state);
  }
}

}  // namespace

std::vector<int64_t> uneven_counts(int ranks, int64_t unit) {
  std::vector<int64_t> counts;
  for (int s = 0; s < ranks; ++s)
    for (int d = 0; d < ranks; ++d) counts.push_back(unit * ((s * d + s + 1) % 4));
  return counts;
}

Contributions all_ranks(int ranks) {
  return ranks >= 32 ? ~Contributions{0} : (Contributions{1} << ranks) - 1;
}

std::pair<int, double> AlgorithmRun::step_at(double t) const {
  const int n = steps();
  if (n == 0) return {0, 1.0};
  if (t < 0.0) return {-1, 0.0};
  if (t >= total_s()) return {n, 1.0};
  // The last step that has begun.
  const auto it = std::upper_bound(step_begin_s.begin(), step_begin_s.end() - 1, t);
  const int k = static_cast<int>(it - step_begin_s.begin()) - 1;
  const double length = step_begin_s[k + 1] - step_begin_s[k];
  return {k, length > 0.0 ? (t - step_begin_s[k]) / length : 1.0};
}

std::pair<int, int> AlgorithmRun::chunks_of(const Transfer& t) const {
  if (t.chunk < 0) return {0, plan.parts};
  return {t.chunk, std::min(t.chunk + t.chunks, plan.parts)};
}

AlgorithmRun make_run(const CollectiveSetup& setup, collectives::Algorithm algorithm) {
  AlgorithmRun run;
  run.plan = plan_for(setup, algorithm);
  run.prediction = collectives::predict(run.plan, setup.link);
  run.uniform_time = run.prediction.total_seconds <= 0.0;
  run.step_begin_s.push_back(0.0);
  for (size_t k = 0; k < run.plan.steps.size(); ++k)
    run.step_begin_s.push_back(run.step_begin_s.back() +
                               (run.uniform_time ? 1.0 : run.prediction.step_seconds[k]));
  if (setup.collective == Collective::kAllToAll) {
    replay_all_to_all(run);
    return run;
  }

  // Replay on paper. Before the first step: a broadcast's root has the
  // data, the others nothing; for reductions every rank has its own part.
  const int p = setup.ranks;
  const int parts = run.plan.parts;
  std::vector<std::vector<Contributions>> state(p, std::vector<Contributions>(parts, 0));
  for (int r = 0; r < p; ++r)
    for (int c = 0; c < parts; ++c)
      state[r][c] = setup.collective == Collective::kBroadcast ? (r == setup.root ? all_ranks(p) : 0)
                                                                : Contributions{1} << r;
  run.holdings.push_back(state);
  for (const collectives::Step& step : run.plan.steps) {
    // Sends read the buffers as they were when the step began.
    const auto before = state;
    for (const Transfer& t : step.transfers) {
      const auto [first, last] = run.chunks_of(t);
      for (int c = first; c < last; ++c)
        state[t.dst][c] = t.reduce ? (state[t.dst][c] | before[t.src][c]) : before[t.src][c];
    }
    run.holdings.push_back(state);
  }
  return run;
}

std::string transfer_label(int chunk, int chunks, int64_t bytes) {
  if (chunk < 0) return format_bytes(static_cast<double>(bytes));
  std::string name = "c" + std::to_string(chunk);
  if (chunks > 1) name += "-" + std::to_string(chunk + chunks - 1);
  return name + ": " + format_bytes(static_cast<double>(bytes));
}

ImVec2 SceneLayout::cell(int rank, int c, int parts) const {
  const ImVec2 center = nodes[rank];
  const float width = cell_size * parts;
  return ImVec2(center.x - width * 0.5f + c * cell_size, center.y + node_radius + 4.0f);
}

std::pair<ImVec2, ImVec2> SceneLayout::block(const Plan& plan, int rank, bool output, int peer) const {
  const Range b = output ? plan.output_block(rank, peer) : plan.input_block(rank, peer);
  const ImVec2 left = cell(rank, 0, plan.world_size);
  const float y = left.y + (output ? cell_size + 2.0f : 0.0f);
  const auto x_of = [&](int64_t element) { return left.x + static_cast<float>(element * element_width); };
  return {ImVec2(x_of(b.offset), y), ImVec2(x_of(b.offset + b.count), y + cell_size - 1)};
}

SceneLayout layout_scene(const AlgorithmRun& run, double t, ImVec2 min, ImVec2 max, float scale) {
  SceneLayout s;
  const int p = run.plan.world_size;
  const float w = max.x - min.x;
  const float h = max.y - min.y;
  // all_to_all draws a second row of blocks under each node: room for it.
  const float extra = run.plan.collective == Collective::kAllToAll ? 0.5f * (10.0f * scale + 2.0f) : 0.0f;
  const ImVec2 center(min.x + w * 0.5f, min.y + h * 0.5f - 6.0f - extra);
  const float ring = 0.38f * std::min(w, h) - extra;
  const float pi = 3.14159265f;
  s.node_radius = std::clamp(ring * std::sin(pi / p) * 0.55f, 9.0f * scale, 26.0f * scale);
  s.cell_size = std::clamp(2.4f * s.node_radius / run.plan.parts, 3.0f * scale, 10.0f * scale);
  for (int r = 0; r < p; ++r) {
    const float angle = -pi / 2 + 2 * pi * r / p;
    s.nodes.emplace_back(center.x + ring * std::cos(angle), center.y + ring * std::sin(angle));
  }
  if (run.plan.collective == Collective::kAllToAll) {
    int64_t longest = 0;
    for (int r = 0; r < p; ++r) longest = std::max({longest, run.plan.input_count(r), run.plan.output_count(r)});
    s.element_width = longest > 0 ? static_cast<double>(s.cell_size) * p / static_cast<double>(longest) : 0.0;
  }

  const auto [step, progress] = run.step_at(t);
  s.step = step;
  s.progress = progress;
  if (step < 0 || step >= run.steps()) return s;
  for (const Transfer& tr : run.plan.steps[step].transfers) {
    SceneArrow a;
    a.src = tr.src;
    a.dst = tr.dst;
    a.chunk = tr.chunk;
    a.chunks = tr.chunk < 0 ? 1 : tr.chunks;
    a.bytes = tr.range.count * run.plan.elem_bytes;
    a.reduce = tr.reduce;
    a.color = chunk_color(tr.chunk);
    const ImVec2 from = s.nodes[tr.src];
    const ImVec2 to = s.nodes[tr.dst];
    const float dx = to.x - from.x;
    const float dy = to.y - from.y;
    const float length = std::max(1.0f, std::sqrt(dx * dx + dy * dy));
    const float ux = dx / length;
    const float uy = dy / length;
    // Right-hand normal of the direction of travel.
    const float nx = -uy;
    const float ny = ux;
    const float gap = s.node_radius + 4.0f;
    const float offset = kArrowOffset * scale;
    a.from = ImVec2(from.x + ux * gap + nx * offset, from.y + uy * gap + ny * offset);
    a.to = ImVec2(to.x - ux * gap + nx * offset, to.y - uy * gap + ny * offset);
    const auto f = static_cast<float>(progress);
    a.packet = ImVec2(a.from.x + (a.to.x - a.from.x) * f, a.from.y + (a.to.y - a.from.y) * f);
    // An all-to-all block's chunk is its receiver, whom the arrow shows.
    a.label = run.plan.collective == Collective::kAllToAll ? transfer_label(-1, 1, a.bytes)
                                                          : transfer_label(a.chunk, a.chunks, a.bytes);
    // The label sits beside the shaft a third of the way along, on the
    // arrow's right: arrows that cross in the middle (a tree's last step)
    // keep their labels apart.
    const ImVec2 at(a.from.x + (a.to.x - a.from.x) * 0.3f, a.from.y + (a.to.y - a.from.y) * 0.3f);
    const float text_width = 7.0f * scale * static_cast<float>(a.label.size());
    a.label_at = ImVec2(at.x + nx * 10.0f * scale - (nx < 0.0f ? text_width * -nx : 0.0f),
                        at.y + ny * 10.0f * scale - 7.0f * scale);
    s.arrows.push_back(std::move(a));
  }
  return s;
}

}  // namespace distlab::viz
