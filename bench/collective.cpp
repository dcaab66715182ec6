// distlab-bench collective: the collectives timed and checked the way
// nccl-tests does it: a size sweep (-b -e -f), -n timed calls after -w
// untimed ones, and for every size a check (-c) that counts the elements
// that differ from a reference computed independently on every rank.
//
//   distlab-bench collective --backend threads --ranks 4 --algorithm all
//   distlab-run --nproc-per-node 4 -- distlab-bench collective --backend gloo -b 16M -e 256M --algorithm all
//
// Each size: every algorithm's warm-up calls, then the timed calls (in
// --rounds turns), then each algorithm once more from fresh inputs, checked.
//
// Columns, as nccl-tests prints them:
//   size    bytes of the whole buffer on one rank (count * element size; for
//           reduce_scatter and all_gather the full buffer, not one chunk)
//   time    the slowest rank's mean time per call, microseconds
//   algbw   size / time
//   busbw   algbw * factor, the rate each rank's link carries in an optimal
//           algorithm, comparable with the link's bandwidth whatever p is:
//             all_reduce                  2(p-1)/p  (reduce-scatter + all-gather each move (p-1)/p of it)
//             reduce_scatter, all_gather  (p-1)/p
//             broadcast, reduce           1
//           (collectives::bus_bandwidth_factor, lib/collectives/cost_model.hpp)
//   #wrong  elements, summed over ranks, that differ from the reference
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "bench_registry.hpp"
#include "collectives/collectives.hpp"
#include "collectives/cost_model.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"

namespace distlab::bench {
namespace {

using collectives::Algorithm;
using collectives::Collective;
using collectives::Range;
using comm::ReduceOp;

struct CollectiveOptions {
  comm::JobOptions job;
  SizeSweep sizes{"8", "64M"};
  int factor = 2;
  int iters = 20, warmup = 5, check = 1, rounds = 1;
  std::string collective = "all_reduce", algorithm = "native", dtype = "float", op = "sum";
  int root = 0;
};

const std::map<std::string, at::ScalarType> kDtypes = {{"float", at::kFloat},   {"double", at::kDouble},
                                                       {"half", at::kHalf},     {"bfloat16", at::kBFloat16},
                                                       {"int64", at::kLong}};

// The largest whole number below which every integer is exact in `dtype`.
double exact_integers(at::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf: return 2048;
    case at::kBFloat16: return 256;
    case at::kFloat: return 16777216;
    default: return 9.0e15;  // double (2^53), int64
  }
}

// The inputs: element i of rank r is ((131 i + 71 r) mod m) - k, m = 2k + 1.
// Whole numbers with |p * k| exact in the dtype, so every order of adding
// them gives the same result and a reference needs no tolerance (except
// avg, which divides once). The pattern repeats every m elements: the
// reference is computed on one period and tiled.
class Inputs {
 public:
  Inputs(int world_size, at::ScalarType dtype, at::Device device)
      : p_(world_size), dtype_(dtype), device_(device),
        k_(std::max<int64_t>(1, std::min<int64_t>(100, static_cast<int64_t>(exact_integers(dtype) / world_size)))),
        m_(2 * k_ + 1) {}

  // One period of rank r's input, int64 on the CPU.
  at::Tensor period(int rank) const {
    return at::arange(m_, at::kLong).mul(131).add(71 * rank).remainder(m_).sub(k_);
  }

  // One period of op over every rank's input, in the dtype.
  at::Tensor reduced_period(ReduceOp op) const {
    at::Tensor acc = period(0);
    for (int r = 1; r < p_; ++r) {
      if (op == ReduceOp::kMax) acc = at::maximum(acc, period(r));
      else if (op == ReduceOp::kMin) acc = at::minimum(acc, period(r));
      else acc = acc + period(r);
    }
    at::Tensor result = acc.to(dtype_);
    if (op == ReduceOp::kAvg) result = at::isFloatingType(dtype_) ? result / p_ : result.div(p_, "trunc").to(dtype_);
    return result;
  }

  // Elements range.offset .. range.offset + range.count of the infinite
  // repetition of `one_period`, on the device.
  at::Tensor tile(const at::Tensor& one_period, Range range) const {
    const int64_t repeats = (range.count + m_ - 1) / m_ + 1;
    return one_period.to(dtype_).roll(-(range.offset % m_)).repeat({repeats}).narrow(0, 0, range.count).to(device_);
  }

  // Elements further than this from the reference are wrong: 0, except an
  // average of floats, which may round either way (NCCL averages by
  // scaling before it sums).
  double tolerance(ReduceOp op) const {
    if (op != ReduceOp::kAvg || !at::isFloatingType(dtype_)) return 0;
    const double eps = dtype_ == at::kHalf ? 0x1p-10 : dtype_ == at::kBFloat16 ? 0x1p-7
                       : dtype_ == at::kFloat ? 0x1p-23 : 0x1p-52;
    return 2 * eps * static_cast<double>(k_);
  }

 private:
  int p_;
  at::ScalarType dtype_;
  at::Device device_;
  int64_t k_, m_;
};

int64_t count_wrong(const at::Tensor& got, const at::Tensor& want, double tolerance) {
  if (got.numel() == 0) return 0;
  if (tolerance == 0) return got.ne(want).sum().item<int64_t>();
  return (got.to(at::kDouble) - want.to(at::kDouble)).abs().gt(tolerance).sum().item<int64_t>();
}

// One collective: how to fill this rank's buffer, call it, and check it.
class Case {
 public:
  Case(comm::Communicator& comm, Collective collective, ReduceOp op, int root, const Inputs& inputs)
      : comm_(comm), collective_(collective), op_(op), root_(root), inputs_(inputs) {}

  void fill(at::Tensor& buffer) const {
    const int64_t n = buffer.numel();
    if (collective_ == Collective::kAllGather) {
      // Only this rank's chunk is its input; the rest must come from the others.
      buffer.zero_();
      const Range mine = chunk(n, comm_.rank());
      buffer.narrow(0, mine.offset, mine.count).copy_(inputs_.tile(inputs_.period(comm_.rank()), mine));
    } else {
      buffer.copy_(inputs_.tile(inputs_.period(comm_.rank()), {0, n}));
    }
  }

  void call(at::Tensor& buffer, Algorithm algorithm) const {
    switch (collective_) {
      case Collective::kBroadcast: collectives::broadcast(comm_, buffer, root_, algorithm); break;
      case Collective::kReduce: collectives::reduce(comm_, buffer, root_, op_, algorithm); break;
      case Collective::kAllReduce: collectives::all_reduce(comm_, buffer, op_, algorithm); break;
      case Collective::kReduceScatter: collectives::reduce_scatter(comm_, buffer, op_, algorithm); break;
      case Collective::kAllGather: collectives::all_gather(comm_, buffer, algorithm); break;
    }
  }

  // Elements of this rank's result that differ from the reference.
  int64_t wrong(const at::Tensor& buffer) const {
    const int64_t n = buffer.numel();
    const int me = comm_.rank();
    const double tol = inputs_.tolerance(op_);
    auto part = [&](Range r) { return buffer.narrow(0, r.offset, r.count); };
    switch (collective_) {
      case Collective::kBroadcast: return count_wrong(buffer, inputs_.tile(inputs_.period(root_), {0, n}), 0);
      case Collective::kReduce:
        return me != root_ ? 0 : count_wrong(buffer, inputs_.tile(inputs_.reduced_period(op_), {0, n}), tol);
      case Collective::kAllReduce: return count_wrong(buffer, inputs_.tile(inputs_.reduced_period(op_), {0, n}), tol);
      case Collective::kReduceScatter:
        return count_wrong(part(chunk(n, me)), inputs_.tile(inputs_.reduced_period(op_), chunk(n, me)), tol);
      case Collective::kAllGather: {
        int64_t wrong = 0;
        for (int c = 0; c < comm_.size(); ++c)
          wrong += count_wrong(part(chunk(n, c)), inputs_.tile(inputs_.period(c), chunk(n, c)), 0);
        return wrong;
      }
    }
    return 0;
  }

  bool rooted() const { return collective_ == Collective::kBroadcast || collective_ == Collective::kReduce; }
  bool reduces() const { return collective_ != Collective::kBroadcast && collective_ != Collective::kAllGather; }

 private:
  Range chunk(int64_t n, int c) const { return collectives::chunk_range(n, comm_.size(), c); }

  comm::Communicator& comm_;
  Collective collective_;
  ReduceOp op_;
  int root_;
  const Inputs& inputs_;
};

// Work queued on a GPU counts only once it is done.
void wait_for_device(const at::Tensor& buffer) {
  if (buffer.is_cuda() && buffer.numel() > 0) buffer.narrow(0, 0, 1).cpu();
}

double max_over_ranks(comm::Communicator& comm, double mine) {
  auto t = at::tensor({mine}, at::kDouble).to(comm.device());
  comm.native_all_reduce(t, ReduceOp::kMax);
  return t.cpu().item<double>();
}

int64_t sum_over_ranks(comm::Communicator& comm, int64_t mine) {
  auto t = at::tensor({mine}, at::kLong).to(comm.device());
  comm.native_all_reduce(t, ReduceOp::kSum);
  return t.cpu().item<int64_t>();
}

// Native first (the reference for the summary), then every algorithm of
// the collective, or just the one asked for.
std::vector<Algorithm> algorithms_to_run(Collective collective, const std::string& choice) {
  std::vector<Algorithm> all{Algorithm::kNative};
  for (Algorithm a : collectives::algorithms_for(collective)) all.push_back(a);
  if (choice == "all") return all;
  const Algorithm chosen = collectives::parse_algorithm(choice);
  if (std::find(all.begin(), all.end(), chosen) == all.end()) {
    std::string names;
    for (Algorithm a : all) names += std::string(names.empty() ? "" : ", ") + collectives::to_string(a);
    throw std::invalid_argument("--algorithm " + choice + " does not implement " + collectives::to_string(collective) +
                                " (choose " + names + " or all)");
  }
  return {chosen};
}

struct Result {
  double seconds = 0;
  double busbw = 0;
};

int run_rank(comm::Communicator& comm, const CollectiveOptions& o) {
  const Collective collective = collectives::parse_collective(o.collective);
  const ReduceOp op = comm::parse_reduce_op(o.op);
  const at::ScalarType dtype = kDtypes.at(o.dtype);
  const auto algorithms = algorithms_to_run(collective, o.algorithm);
  if (o.root >= comm.size())
    throw comm::SetupError("--root " + std::to_string(o.root) + " is not a rank of a job of " +
                           std::to_string(comm.size()));
  const int64_t lo = o.sizes.min(), hi = o.sizes.max();
  const Inputs inputs(comm.size(), dtype, comm.device());
  const Case bench_case(comm, collective, op, o.root, inputs);
  const int elem = static_cast<int>(c10::elementSize(dtype));
  const double factor = collectives::bus_bandwidth_factor(collective, comm.size());
  const bool me0 = comm.rank() == 0;
  const int rounds = std::min(o.rounds, o.iters);

  if (me0) {
    std::printf("# distlab-bench collective: %s, backend %s, %d ranks, device %s\n", collectives::to_string(collective),
                comm.backend().c_str(), comm.size(), comm.device().str().c_str());
    std::printf("# -n %d -w %d -c %d --rounds %d; time: the slowest rank's mean per call; #wrong: elements that\n"
                "# differ from the reference, summed over ranks%s\n#\n",
                o.iters, o.warmup, o.check, rounds, o.check ? "" : " (not checked: -c 0)");
    std::printf("#%11s %13s %9s %7s %6s %17s %11s %9s %9s %8s\n", "size", "count", "type", "redop", "root",
                "algorithm", "time", "algbw", "busbw", "#wrong");
    std::printf("#%11s %13s %9s %7s %6s %17s %11s %9s %9s %8s\n", "(B)", "(elements)", "", "", "", "", "(us)",
                "(GB/s)", "(GB/s)", "");
  }
  std::vector<std::pair<int64_t, std::vector<Result>>> table;  // per size, per algorithm
  int64_t total_wrong = 0;
  for (int64_t bytes = std::max<int64_t>(lo, elem); bytes <= hi; bytes *= o.factor) {
    const int64_t count = bytes / elem;
    at::Tensor buffer = at::empty({count}, at::TensorOptions().dtype(dtype).device(comm.device()));
    bench_case.fill(buffer);
    for (Algorithm algorithm : algorithms)
      for (int i = 0; i < o.warmup; ++i) bench_case.call(buffer, algorithm);
    // The algorithms take turns, round after round, so that a machine busy
    // with something else slows them all alike; one round (the default) is
    // nccl-tests' way: each algorithm's -n calls back to back.
    std::vector<double> seconds(algorithms.size(), 0.0);
    for (int round = 0; round < rounds; ++round) {
      const int calls = o.iters / rounds + (round < o.iters % rounds ? 1 : 0);
      for (size_t a = 0; a < algorithms.size(); ++a) {
        wait_for_device(buffer);
        comm.barrier();  // everybody starts the clock together
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) bench_case.call(buffer, algorithms[a]);
        wait_for_device(buffer);
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        seconds[a] += max_over_ranks(comm, took.count());
      }
    }
    std::vector<Result> results;
    for (size_t a = 0; a < algorithms.size(); ++a) {
      const double per_call = seconds[a] / o.iters;
      // The timed calls left sums of sums behind: start again from the inputs.
      int64_t wrong = -1;
      if (o.check) {
        bench_case.fill(buffer);
        bench_case.call(buffer, algorithms[a]);
        wrong = sum_over_ranks(comm, bench_case.wrong(buffer));
        total_wrong += wrong;
      }
      const double algbw = static_cast<double>(count) * elem / per_call / 1e9;
      results.push_back({per_call, algbw * factor});
      if (!me0) continue;
      std::printf("%12lld %13lld %9s %7s %6d %17s %11.1f %9.3f %9.3f %8s\n", static_cast<long long>(count) * elem,
                  static_cast<long long>(count), o.dtype.c_str(), bench_case.reduces() ? o.op.c_str() : "none",
                  bench_case.rooted() ? o.root : -1, collectives::to_string(algorithms[a]), per_call * 1e6, algbw,
                  algbw * factor, o.check ? std::to_string(wrong).c_str() : "N/A");
      std::fflush(stdout);
    }
    table.push_back({count * elem, results});
  }

  if (me0 && algorithms.size() > 1 && !table.empty()) {
    std::printf("#\n# busbw against native (%s), per size:\n#%11s", comm.backend().c_str(), "size");
    for (size_t a = 1; a < algorithms.size(); ++a) std::printf(" %17s", collectives::to_string(algorithms[a]));
    std::printf("\n");
    for (const auto& [bytes, results] : table) {
      std::printf("%12s", format_size(bytes).c_str());
      for (size_t a = 1; a < results.size(); ++a) std::printf(" %17.2f", results[a].busbw / results[0].busbw);
      std::printf("\n");
    }
  }
  if (me0 && o.check)
    std::printf("# #wrong in total: %lld%s\n", static_cast<long long>(total_wrong), total_wrong ? "  FAILED" : "  OK");
  return total_wrong == 0 ? 0 : 1;
}

Registration reg("collective", "collectives timed and checked, nccl-tests style", [](CLI::App& cmd) {
  auto o = std::make_shared<CollectiveOptions>();
  comm::add_job_flags(cmd, o->job);
  o->sizes.add_flags(cmd, "buffer");
  cmd.add_option("-f,--stepfactor", o->factor, "size multiplier between rows")->check(CLI::Range(2, 1024))
      ->capture_default_str();
  cmd.add_option("-n,--iters", o->iters, "timed calls per size")->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd.add_option("-w,--warmup_iters", o->warmup, "untimed calls first")->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd.add_option("--rounds", o->rounds,
                 "with several algorithms: split the -n calls into this many rounds in which the algorithms take "
                 "turns, so that other load on the machine slows them all alike")
      ->check(CLI::Range(1, 1000000))->capture_default_str();
  cmd.add_option("-c,--check", o->check, "1: check every size against the reference; 0: time only")
      ->check(CLI::Range(0, 1))->capture_default_str();
  cmd.add_option("--collective", o->collective, "broadcast, reduce, all_reduce, reduce_scatter or all_gather")
      ->check(CLI::IsMember({"broadcast", "reduce", "all_reduce", "reduce_scatter", "all_gather"}))
      ->capture_default_str();
  cmd.add_option("--algorithm", o->algorithm,
                 "native, sequential, tree, ring, halving_doubling, reduce_broadcast, or all (native and every "
                 "algorithm of the collective, side by side)")
      ->check(CLI::IsMember({"native", "sequential", "tree", "ring", "halving_doubling", "reduce_broadcast", "all"}))
      ->capture_default_str();
  cmd.add_option("-d,--dtype", o->dtype, "float, double, half, bfloat16 or int64")
      ->check(CLI::IsMember({"float", "double", "half", "bfloat16", "int64"}))
      ->capture_default_str();
  cmd.add_option("-o,--op", o->op, "sum, avg, max or min")->check(CLI::IsMember({"sum", "avg", "max", "min"}))
      ->capture_default_str();
  cmd.add_option("-r,--root", o->root, "root of broadcast and reduce")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  return [o] {
    int status = 0;
    comm::run_job(comm::with_env_defaults(o->job), [&](comm::Communicator& comm) {
      const int mine = run_rank(comm, *o);
      if (comm.rank() == 0) status = mine;
    });
    return status;
  };
});

}  // namespace
}  // namespace distlab::bench
