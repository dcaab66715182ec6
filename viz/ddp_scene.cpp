#include "ddp_scene.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "collectives/plan.hpp"

namespace distlab::viz {
namespace {

constexpr int kPresetLayers = 8;
constexpr int64_t kPresetWidth = 2048;

void add_linear(DdpModel& m, const std::string& name, int64_t in, int64_t out) {
  m.params.push_back({name + ".weight", in * out});
  m.params.push_back({name + ".bias", out});
}

// Backward visits layers in the reverse of the order forward used them;
// inside a layer, the bias's gradient (a sum) is ready before the weight's.
std::vector<int> ready_order_of_use(const std::vector<int>& layers_in_use_order) {
  std::vector<int> order;
  for (auto it = layers_in_use_order.rbegin(); it != layers_in_use_order.rend(); ++it) {
    order.push_back(2 * *it + 1);
    order.push_back(2 * *it);
  }
  return order;
}

int64_t int_arg(const trace::Event& e, const char* key) {
  try {
    return std::stoll(e.arg(key, "-1"));
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

DdpModel preset_model(const std::string& name) {
  DdpModel m;
  m.name = name;
  std::vector<int> use;
  if (name == "mlp") {
    for (int l = 0; l < kPresetLayers; ++l) {
      add_linear(m, "layers." + std::to_string(l), kPresetWidth, kPresetWidth);
      use.push_back(l);
    }
  } else if (name == "reordered") {
    add_linear(m, "head", kPresetWidth, kPresetWidth);  // registered first, used last
    for (int l = 0; l < kPresetLayers - 1; ++l) {
      add_linear(m, "layers." + std::to_string(l), kPresetWidth, kPresetWidth);
      use.push_back(l + 1);
    }
    use.push_back(0);
  } else {
    throw std::invalid_argument("unknown model '" + name + "' (known: mlp, reordered)");
  }
  m.ready_order = ready_order_of_use(use);
  return m;
}

DdpModel model_of_sizes(const std::string& text) {
  DdpModel m;
  m.name = "layers";
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    size_t used = 0;
    long long count = 0;
    try {
      count = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || count <= 0)
      throw std::invalid_argument("--layers takes positive parameter counts, comma-separated; got '" + item + "'");
    m.params.push_back({"p" + std::to_string(m.params.size()), count});
  }
  if (m.params.empty()) throw std::invalid_argument("--layers needs at least one parameter count");
  m.ready_order = ddp::reverse_registration_order(static_cast<int>(m.params.size()));
  return m;
}

double all_reduce_seconds(int64_t bytes, int ranks, const collectives::LinkParams& link) {
  if (ranks < 2 || bytes <= 0) return 0.0;
  const collectives::Plan plan = collectives::make_plan(collectives::Collective::kAllReduce,
                                                        collectives::Algorithm::kRing, ranks, (bytes + 3) / 4, 0, 4);
  return collectives::predict(plan, link).total_seconds;
}

DdpStep simulate_ddp_step(const ddp::BucketPlan& plan, const std::vector<int>& ready_order, const DdpCosts& c) {
  ddp::check_order(ready_order, static_cast<int>(plan.params.size()));
  DdpStep step;
  int64_t total_bytes = 0;
  for (const auto& p : plan.params) total_bytes += p.bytes();
  const double backward_s = static_cast<double>(total_bytes) / c.backward_bytes_per_s;
  const double forward_s = backward_s * 0.5;
  double t = 0.0;
  for (int k = 0; k < c.no_sync_steps; ++k) {
    step.local_forward.push_back({t, t + forward_s});
    t += forward_s;
    step.local_backward.push_back({t, t + backward_s});
    t += backward_s;
  }
  step.forward = {t, t + forward_s};
  t += forward_s;

  // Backward: gradients one after another; each bucket knows when its last one is ready.
  const std::vector<int> bucket_of = plan.bucket_of();
  std::vector<double> bucket_ready(plan.buckets.size(), 0.0);
  for (int i : ready_order) {
    const double seconds = static_cast<double>(plan.params[i].bytes()) / c.backward_bytes_per_s;
    step.grads.push_back({{t, t + seconds}, i, bucket_of[i]});
    t += seconds;
    bucket_ready[bucket_of[i]] = std::max(bucket_ready[bucket_of[i]], t);
  }
  const double backward_end = t;
  double stream = 0.0;  // when the communication stream is free
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const double begin = std::max(bucket_ready[b], stream);
    const double seconds = all_reduce_seconds(plan.buckets[b].bytes, c.ranks, c.link);
    step.all_reduces.push_back({{begin, begin + seconds}, static_cast<int>(b), plan.buckets[b].bytes});
    stream = begin + seconds;
    step.comm_s += seconds;
  }
  step.wait = {backward_end, std::max(backward_end, stream)};
  const double optimizer_s = static_cast<double>(total_bytes) / c.optimizer_bytes_per_s;
  step.optimizer = {step.wait.end_s, step.wait.end_s + optimizer_s};
  step.step_s = step.optimizer.end_s;

  // The overlap as the library reads it from a trace of the reducer.
  std::vector<trace::Event> events;
  auto us = [](double s) { return static_cast<int64_t>(s * 1e6 + 0.5); };
  for (const auto& a : step.all_reduces) {
    trace::Event e;
    e.lane = "ddp";
    e.category = "bucket";
    e.begin_us = us(a.begin_s);
    e.end_us = us(a.end_s);
    e.args = {{"bucket", std::to_string(a.bucket)}, {"step", "0"}};
    events.push_back(e);
  }
  trace::Event wait;
  wait.lane = "ddp";
  wait.category = "ddp_wait";
  wait.begin_us = us(step.wait.begin_s);
  wait.end_us = us(step.wait.end_s);
  wait.args = {{"step", "0"}};
  events.push_back(wait);
  step.overlap = ddp::overlap_of_step(events, 0, 0);
  return step;
}

std::vector<int> packing_order(const ddp::BucketPlan& plan) {
  std::vector<int> order;
  for (const ddp::Bucket& b : plan.buckets) order.insert(order.end(), b.params.begin(), b.params.end());
  return order;
}

ddp::BucketPlan parse_plan_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw std::invalid_argument("a bucket plan that is not a JSON object");
  const auto& names = j.value("names", nlohmann::json::array());
  const auto& sizes = j.value("sizes", nlohmann::json::array());
  const auto& buckets = j.value("buckets", nlohmann::json::array());
  if (!names.is_array() || !sizes.is_array() || !buckets.is_array() || names.size() != sizes.size())
    throw std::invalid_argument("a bucket plan needs arrays names and sizes of one length, and buckets");
  ddp::BucketPlan plan;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!names[i].is_string() || !sizes[i].is_number_integer() || sizes[i].get<int64_t>() < 0)
      throw std::invalid_argument("bucket plan parameter " + std::to_string(i) + ": a name and a byte size expected");
    ddp::ParamInfo p;
    p.name = names[i].get<std::string>();
    p.numel = sizes[i].get<int64_t>() / p.element_size;
    plan.params.push_back(p);
  }
  for (const auto& b : buckets) {
    if (!b.is_object() || !b.contains("params") || !b["params"].is_array())
      throw std::invalid_argument("a bucket of the plan has no params list");
    ddp::Bucket bucket;
    for (const auto& i : b["params"]) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= static_cast<int64_t>(names.size()))
        throw std::invalid_argument("a bucket lists a parameter outside 0.." + std::to_string(names.size() - 1));
      bucket.params.push_back(i.get<int>());
      bucket.bytes += plan.params[i.get<size_t>()].bytes();
      bucket.numel += plan.params[i.get<size_t>()].numel;
    }
    plan.buckets.push_back(bucket);
  }
  plan.order = packing_order(plan);
  ddp::check_order(plan.order, static_cast<int>(plan.params.size()));
  return plan;
}

std::optional<MeasuredDdp> measure_ddp_trace(const std::vector<trace::Event>& all_events, int rank, int64_t step,
                                             int instance) {
  // Each DDP the rank built starts with a first "bucket plan"; its events
  // run until the next DDP's. Step numbers restart with each DDP, so one is
  // measured at a time.
  std::vector<int64_t> starts;
  for (const trace::Event& e : all_events)
    if (e.rank == rank && e.category == "bucket_plan" && !e.arg("plan").empty() && e.arg("rebuilt") != "1")
      starts.push_back(e.begin_us);
  if (starts.empty()) return std::nullopt;
  std::sort(starts.begin(), starts.end());
  MeasuredDdp out;
  out.rank = rank;
  out.instances = static_cast<int>(starts.size());
  out.instance = std::clamp(instance, 0, out.instances - 1);
  const int64_t from = starts[static_cast<size_t>(out.instance)];
  const int64_t until = out.instance + 1 < out.instances ? starts[static_cast<size_t>(out.instance) + 1]
                                                         : std::numeric_limits<int64_t>::max();
  std::vector<trace::Event> events;
  for (const trace::Event& e : all_events)
    if (e.rank == rank && e.begin_us >= from && e.begin_us < until) events.push_back(e);

  bool have_plan = false;
  for (const trace::Event& e : events) {
    if (e.category != "bucket_plan" || e.arg("plan").empty()) continue;
    ddp::BucketPlan plan = parse_plan_json(e.arg("plan"));
    if (e.arg("rebuilt") == "1")
      out.after = std::move(plan);
    else if (!have_plan)
      out.before = std::move(plan);
    have_plan = have_plan || e.arg("rebuilt") != "1";
  }
  out.model.name = "trace";
  out.model.params = out.before.params;
  out.model.ready_order = out.after ? out.after->order : out.before.order;

  // The step: its "wait for buckets" begins when backward's last gradient is ready.
  const trace::Event* wait = nullptr;
  int64_t previous_end = std::numeric_limits<int64_t>::min();
  std::vector<const trace::Event*> waits;
  for (const trace::Event& e : events)
    if (e.rank == rank && e.category == "ddp_wait") waits.push_back(&e);
  std::sort(waits.begin(), waits.end(), [](auto* a, auto* b) { return a->begin_us < b->begin_us; });
  for (const trace::Event* w : waits) {
    if (step < 0 || int_arg(*w, "step") == step) {
      if (wait != nullptr) previous_end = wait->end_us;
      wait = w;
      if (step >= 0) break;
    } else if (int_arg(*w, "step") < step) {
      previous_end = w->end_us;
    }
  }
  if (wait == nullptr) return out;  // a plan but no synchronized step
  out.step = int_arg(*wait, "step");
  out.overlap = ddp::overlap_of_step(events, rank, out.step);

  std::vector<const trace::Event*> grads;
  for (const trace::Event& e : events)
    if (e.rank == rank && e.category == "grad_ready" && e.begin_us > previous_end && e.begin_us <= wait->begin_us)
      grads.push_back(&e);
  std::sort(grads.begin(), grads.end(), [](auto* a, auto* b) { return a->begin_us < b->begin_us; });
  const int64_t origin = grads.empty() ? wait->begin_us : grads.front()->begin_us;
  auto s = [origin](int64_t us) { return (us - origin) * 1e-6; };
  // A gradient was computed between the one before it and its own hook.
  int64_t last = origin;
  for (const trace::Event* g : grads) {
    out.measured.grads.push_back({{s(last), s(g->end_us)}, static_cast<int>(int_arg(*g, "param")),
                                  static_cast<int>(int_arg(*g, "bucket"))});
    last = g->end_us;
  }
  const std::string step_text = std::to_string(out.step);
  for (const trace::Event& e : events)
    if (e.rank == rank && e.category == "bucket" && e.arg("step") == step_text) {
      out.measured.all_reduces.push_back({{s(e.begin_us), s(e.end_us)}, static_cast<int>(int_arg(e, "bucket")), e.bytes});
      out.measured.comm_s += e.duration_us() * 1e-6;
    }
  std::sort(out.measured.all_reduces.begin(), out.measured.all_reduces.end(),
            [](const auto& a, const auto& b) { return a.begin_s < b.begin_s; });
  out.measured.wait = {s(wait->begin_us), s(wait->end_us)};
  out.measured.optimizer = {out.measured.wait.end_s, out.measured.wait.end_s};
  out.measured.step_s = out.measured.wait.end_s;
  out.measured.overlap = out.overlap;
  return out;
}

}  // namespace distlab::viz
