#include "planner/calibrate.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "collectives/calibrate.hpp"
#include "collectives/collectives.hpp"
#include "comm/job.hpp"
#include "planner/cut_pieces.hpp"
#include "planner/pieces.hpp"
#include "planner/timing.hpp"

namespace distlab::planner {

namespace {

// The best time of one call of `fn` over a few rounds, each repeating it
// for at least `seconds` (after one untimed call: first touches, caches).
double best_seconds(const std::function<void()>& fn, double seconds) {
  fn();
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    int64_t calls = 0;
    const auto t0 = Clock::now();
    do {
      fn();
      ++calls;
    } while (since(t0) < seconds);
    best = std::min(best, since(t0) / double(calls));
  }
  return best;
}

std::vector<MatmulPoint> measure_matmul(const ModelShape& m, const CalibrationOptions& o) {
  std::set<std::pair<int64_t, int64_t>> kn;
  for (const int t : {1, 2, 4}) {
    if (m.lm.emsize % t != 0 || m.lm.nhid % t != 0) continue;
    kn.insert({m.lm.emsize, 3 * m.lm.emsize / t});
    kn.insert({m.lm.emsize / t, m.lm.emsize});
    kn.insert({m.lm.emsize, m.lm.nhid / t});
    kn.insert({m.lm.nhid / t, m.lm.emsize});
  }
  kn.insert({m.lm.emsize / m.lm.nhead, m.bptt});  // the attention core
  kn.insert({m.lm.emsize, m.lm.ntokens});           // the decoder
  std::vector<MatmulPoint> out;
  std::vector<std::string> precisions = {"fp32"};
  if (o.bf16) precisions.push_back("bf16");
  for (const std::string& precision : precisions) {
    const at::ScalarType dtype = precision == "bf16" ? at::kBFloat16 : at::kFloat;
    for (const int64_t columns : {1, 2, 4, 10, 20})
      for (const auto& [k, n] : kn) {
        const int64_t rows = columns * m.bptt;
        const at::Tensor a = at::randn({rows, k}).to(dtype), b = at::randn({k, n}).to(dtype);
        const double s = best_seconds([&] { (void)at::mm(a, b); }, o.seconds_per_point);
        out.push_back({rows, k, n, precision, 2.0 * double(rows) * double(k) * double(n) / s});
      }
  }
  return out;
}

// alpha + beta * bytes through two sizes: the small one's time is alpha.
collectives::LinkParams fit(double small_s, int64_t small_bytes, double large_s, int64_t large_bytes) {
  collectives::LinkParams link;
  link.beta_s_per_byte = std::max(0.0, (large_s - small_s) / double(large_bytes - small_bytes));
  link.alpha_s = std::max(0.0, small_s - double(small_bytes) * link.beta_s_per_byte);
  return link;
}

// `count` threads each running small products on one intra-op thread
// until destroyed: the other ranks of a layout, computing.
class Busy {
 public:
  explicit Busy(int count) {
    for (int i = 0; i < count; ++i)
      threads_.emplace_back([this] {
        at::set_num_threads(1);
        const at::Tensor a = at::randn({140, 128}), b = at::randn({128, 256});
        while (!stop_.load()) (void)at::mm(a, b);
      });
  }
  ~Busy() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

std::vector<LinkPoint> measure_links(const CalibrationOptions& o) {
  std::vector<LinkPoint> out;
  constexpr int64_t kSmall = 64, kLarge = 1 << 20;  // floats
  for (int ranks = 2; ranks <= o.max_ranks; ranks *= 2)
    for (int among = ranks; among <= o.max_ranks; among *= 2) {
    // among - ranks others computing meanwhile, as the other ranks of a
    // layout do while a group talks.
    Busy busy(among - ranks);
    comm::JobOptions job;
    job.ranks = ranks;
    job.announce = false;
    std::mutex mutex;
    comm::run_job(job, [&](comm::Communicator& world) {
      at::set_num_threads(1);
      collectives::CalibrationOptions ping;
      ping.iterations = 20;
      const collectives::LinkParams p2p = collectives::calibrate(world, ping);
      // Each collective: the median of a few timed runs at each size, every
      // rank timing its own, rank 0's kept (they end together).
      auto timed = [&](const std::function<void(int64_t)>& op, int64_t count) {
        std::vector<double> times;
        op(count);
        for (int i = 0; i < 9; ++i) {
          world.barrier();
          const auto t0 = Clock::now();
          op(count);
          times.push_back(since(t0));
        }
        return median(times);
      };
      auto all_reduce = [&](int64_t count) {
        at::Tensor t = at::ones({count});
        world.native_all_reduce(t);
      };
      auto all_gather = [&](int64_t count) {
        at::Tensor t = at::ones({count});
        collectives::all_gather(world, t);
      };
      auto reduce_scatter = [&](int64_t count) {
        at::Tensor t = at::ones({count});
        (void)collectives::reduce_scatter(world, t);
      };
      std::vector<LinkPoint> points;
      for (const auto& [name, op] : std::vector<std::pair<std::string, std::function<void(int64_t)>>>{
               {"all_reduce", all_reduce}, {"all_gather", all_gather}, {"reduce_scatter", reduce_scatter}}) {
        // Per byte of the whole tensor, as the predictions count it: an
        // all-gather's output is every rank's piece.
        const double small = timed(op, kSmall), large = timed(op, kLarge);
        const int64_t whole = name == "all_gather" ? ranks : 1;
        points.push_back({"threads", name, ranks, fit(small, kSmall * 4 * whole, large, kLarge * 4 * whole), among});
      }
      if (world.rank() != 0) return;
      std::lock_guard<std::mutex> lock(mutex);
      if (ranks == 2) out.push_back({"threads", "p2p", 2, p2p, among});
      out.insert(out.end(), points.begin(), points.end());
    });
  }
  return out;
}

// k threads, each a rank's work at once (a layer's forward and backward
// in each precision): the wall time over one alone, the median of 3 runs
// (calibrate takes the median of its rounds too).
std::vector<SharingPoint> measure_sharing(const ModelShape& m, const CalibrationOptions& o) {
  std::vector<SharingPoint> out;
  for (const memory::Precision precision :
       o.bf16 ? std::vector<memory::Precision>{memory::Precision::kFp32, memory::Precision::kBf16}
              : std::vector<memory::Precision>{memory::Precision::kFp32}) {
    auto work = [&] {
      at::set_num_threads(1);
      run_layer_steps(m, precision, 5, 20);
    };
    auto wall = [&](int k) {
      std::vector<double> times;
      for (int round = 0; round < 3; ++round) {
        std::vector<std::thread> threads;
        const auto t0 = Clock::now();
        for (int i = 0; i < k; ++i) threads.emplace_back(work);
        for (auto& t : threads) t.join();
        times.push_back(since(t0));
      }
      return median(times);
    };
    const std::string name = memory::to_string(precision);
    const double alone = wall(1);
    out.push_back({1, 1.0, name});
    for (int k = 2; k <= o.max_ranks; k *= 2) out.push_back({k, wall(k) / alone, name});
  }
  return out;
}

// Each point's median over the rounds: a link's alpha and beta apart, a
// sharing point's slowdown; the points matched by what they measured.
std::vector<LinkPoint> median_links(const std::vector<std::vector<LinkPoint>>& rounds) {
  std::vector<LinkPoint> out = rounds.front();
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<double> alpha, beta;
    for (const auto& round : rounds)
      for (const LinkPoint& p : round)
        if (p.backend == out[i].backend && p.collective == out[i].collective && p.ranks == out[i].ranks &&
            p.world == out[i].world)
          alpha.push_back(p.link.alpha_s), beta.push_back(p.link.beta_s_per_byte);
    out[i].link.alpha_s = median(alpha);
    out[i].link.beta_s_per_byte = median(beta);
  }
  return out;
}

std::vector<SharingPoint> median_sharing(const std::vector<std::vector<SharingPoint>>& rounds) {
  std::vector<SharingPoint> out = rounds.front();
  for (SharingPoint& point : out) {
    std::vector<double> slowdown;
    for (const auto& round : rounds)
      for (const SharingPoint& p : round)
        if (p.ranks == point.ranks && p.precision == point.precision) slowdown.push_back(p.slowdown);
    point.slowdown = median(slowdown);
  }
  return out;
}

}  // namespace

std::string today() {
  const std::time_t now = std::time(nullptr);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", std::localtime(&now));
  return text;
}

std::string machine_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "unknown";
  return host;
}

std::string libtorch_version() { return TORCH_VERSION; }

Profile calibrate(const ModelShape& model, const CalibrationOptions& o,
                  const std::function<void(const std::string&)>& say) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);  // a thread rank's share
  Profile p;
  p.date = today();
  p.machine = machine_name();
  p.libtorch = libtorch_version();
  p.device = "cpu";
  p.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto t0 = Clock::now();
  p.matmul = measure_matmul(model, o);
  char line[160];
  std::snprintf(line, sizeof line, "matrix products: %zu shapes x precisions, one thread (%.1f s)", p.matmul.size(),
                since(t0));
  say(line);
  t0 = Clock::now();
  {
    const at::Tensor x = at::randn({1 << 20}), y = at::randn({1 << 20});
    const double s = best_seconds([&] { (void)at::add(x, y); }, o.seconds_per_point * 5);
    p.elementwise_bytes_per_second = 3.0 * 4 * double(1 << 20) / s;
    const at::Tensor u = at::randn({16}), w = at::randn({16});
    p.op_seconds = best_seconds([&] { (void)at::add(u, w); }, o.seconds_per_point * 5);
  }
  std::snprintf(line, sizeof line, "element-wise: %.2f GB/s; one small operation: %.2f us (%.1f s)",
                p.elementwise_bytes_per_second / 1e9, p.op_seconds * 1e6, since(t0));
  say(line);
  // Links and sharing moved most between calibrations minutes apart (a
  // 4-rank all-gather among 8 busy ranks: 0.15 and 8 ms): each is
  // measured in rounds spread over the calibration (before the pieces,
  // between them, after them), and each point's median kept.
  std::vector<std::vector<LinkPoint>> link_rounds;
  std::vector<std::vector<SharingPoint>> sharing_rounds;
  double links_s = 0, sharing_s = 0;
  auto round = [&] {
    auto t = Clock::now();
    link_rounds.push_back(measure_links(o));
    links_s += since(t);
    t = Clock::now();
    sharing_rounds.push_back(measure_sharing(model, o));
    sharing_s += since(t);
  };
  round();
  t0 = Clock::now();
  PieceOptions pieces;
  pieces.seconds_per_point = o.seconds_per_point * 5;
  if (!o.bf16) pieces.precisions = {"fp32"};
  if (p.cores > 1) pieces.threads.push_back(p.cores);  // one rank alone takes every core
  say("the model's pieces as the capstone runs them:");
  measure_pieces(model, pieces, p, say);
  at::set_num_threads(1);
  const double before_cuts = since(t0);
  round();
  t0 = Clock::now();
  measure_cut_pieces(model, o.max_ranks, p, say);
  std::snprintf(line, sizeof line, "pieces: %zu measured (%.1f s)", p.pieces.size(), before_cuts + since(t0));
  say(line);
  for (int r = 2; r < o.rounds; ++r) round();
  p.links = median_links(link_rounds);
  for (int ranks = 2; ranks <= o.max_ranks; ranks *= 2)
    for (int among = ranks; among <= o.max_ranks; among *= 2)
      say("  threads, " + std::to_string(ranks) + " ranks" +
          (among > ranks ? " among " + std::to_string(among) + " busy" : std::string()) +
          ": all-reduce, all-gather, reduce-scatter" + (ranks == 2 ? ", ping-pong" : ""));
  std::snprintf(line, sizeof line, "links: %zu measured, the median of %d rounds (%.1f s)", p.links.size(),
                o.rounds, links_s);
  say(line);
  p.sharing = median_sharing(sharing_rounds);
  for (const SharingPoint& s : p.sharing) {
    if (s.ranks != 1) continue;
    std::string sharing = "ranks sharing " + std::to_string(p.cores) + " cores (" + s.precision + "), each slower by:";
    for (const SharingPoint& k : p.sharing)
      if (k.precision == s.precision) {
        std::snprintf(line, sizeof line, " %d: %.2fx", k.ranks, k.slowdown);
        sharing += line;
      }
    say(sharing);
  }
  std::snprintf(line, sizeof line, "sharing measured, the median of %d rounds (%.1f s)", o.rounds, sharing_s);
  say(line);
  at::set_num_threads(threads);
  return p;
}

}  // namespace distlab::planner
