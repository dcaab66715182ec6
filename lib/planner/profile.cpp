#include "planner/profile.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace distlab::planner {

using nlohmann::json;

namespace {

// Cores and group sizes: ints, compared by their differences.
constexpr int64_t kMaxRanks = 1 << 20;

// Each field read through one of these: a wrong type or a missing key is
// one line naming the field and where it is.
struct Reader {
  std::string what;
  [[noreturn]] void fail(const std::string& why) const { throw ProfileError(what + ": " + why); }

  const json& field(const json& object, const std::string& key, const std::string& where) const {
    if (!object.is_object()) fail(where + " is not an object");
    const auto it = object.find(key);
    if (it == object.end()) fail("no \"" + key + "\" in " + where);
    return *it;
  }
  std::string text(const json& object, const std::string& key, const std::string& where) const {
    const json& v = field(object, key, where);
    if (!v.is_string()) fail("\"" + key + "\" in " + where + " is not a string");
    return v.get<std::string>();
  }
  double positive(const json& object, const std::string& key, const std::string& where) const {
    const json& v = field(object, key, where);
    if (!v.is_number()) fail("\"" + key + "\" in " + where + " is not a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x <= 0) fail("\"" + key + "\" in " + where + " is " + v.dump() + ", not a positive number");
    return x;
  }
  double non_negative(const json& object, const std::string& key, const std::string& where) const {
    const json& v = field(object, key, where);
    if (!v.is_number()) fail("\"" + key + "\" in " + where + " is not a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < 0) fail("\"" + key + "\" in " + where + " is " + v.dump() + ", not a number >= 0");
    return x;
  }
  // At most `largest`: ranks and cores are ints, and a product's sizes are
  // multiplied (1 << 40 each keeps m * k * n in a double's exact range of
  // orders, and far past any real layer).
  int64_t count(const json& object, const std::string& key, const std::string& where,
                int64_t largest = int64_t{1} << 40) const {
    const json& v = field(object, key, where);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(largest)) ||
        v.get<int64_t>() < 1 || v.get<int64_t>() > largest)
      fail("\"" + key + "\" in " + where + " is " + v.dump() + ", not a whole number from 1 to " +
           std::to_string(largest));
    return v.get<int64_t>();
  }
  std::string one_of(const json& object, const std::string& key, const std::string& where,
                     const std::vector<std::string>& choices) const {
    const std::string v = text(object, key, where);
    if (std::find(choices.begin(), choices.end(), v) != choices.end()) return v;
    std::string names;
    for (const std::string& c : choices) names += (names.empty() ? "" : ", ") + c;
    fail("\"" + key + "\" in " + where + " is \"" + v + "\", not one of " + names);
  }
  const json& array(const json& object, const std::string& key, const std::string& where) const {
    const json& v = field(object, key, where);
    if (!v.is_array() || v.empty()) fail("\"" + key + "\" in " + where + " is not a list of at least one entry");
    return v;
  }
};

}  // namespace

double Profile::matmul_flops(int64_t m, int64_t k, int64_t n, const std::string& precision) const {
  std::vector<const MatmulPoint*> same_kn, same_precision;
  for (const MatmulPoint& p : matmul) {
    if (p.precision != precision) continue;
    same_precision.push_back(&p);
    if (p.k == k && p.n == n) same_kn.push_back(&p);
  }
  if (same_precision.empty()) throw ProfileError("the profile measured no " + precision + " matrix products");
  const double lm = std::log(double(std::max<int64_t>(m, 1)));
  if (!same_kn.empty()) {
    std::sort(same_kn.begin(), same_kn.end(), [](auto* a, auto* b) { return a->m < b->m; });
    if (m <= same_kn.front()->m) return same_kn.front()->flops_per_second;
    if (m >= same_kn.back()->m) return same_kn.back()->flops_per_second;
    for (size_t i = 1; i < same_kn.size(); ++i)
      if (m <= same_kn[i]->m) {
        const double l0 = std::log(double(same_kn[i - 1]->m)), l1 = std::log(double(same_kn[i]->m));
        const double t = l1 > l0 ? (lm - l0) / (l1 - l0) : 0;
        return same_kn[i - 1]->flops_per_second + t * (same_kn[i]->flops_per_second - same_kn[i - 1]->flops_per_second);
      }
  }
  // Another shape: the measured one nearest in size (log of its FLOPs).
  const double size = std::log(double(m) * double(k) * double(n));
  const MatmulPoint* best = same_precision.front();
  double best_distance = std::numeric_limits<double>::infinity();
  for (const MatmulPoint* p : same_precision) {
    const double distance = std::fabs(std::log(double(p->m) * double(p->k) * double(p->n)) - size);
    if (distance < best_distance) best_distance = distance, best = p;
  }
  return best->flops_per_second;
}

collectives::LinkParams Profile::link(const std::string& backend, const std::string& collective, int ranks,
                                      int world) const {
  if (world <= 0) world = ranks;
  const LinkPoint* best = nullptr;
  auto distance = [&](const LinkPoint& p) {
    return std::make_pair(std::abs(p.ranks - ranks), std::abs(p.measured_world() - world));
  };
  for (const LinkPoint& p : links)
    if (p.backend == backend && p.collective == collective && (best == nullptr || distance(p) < distance(*best)))
      best = &p;
  if (best == nullptr)
    throw ProfileError("the profile measured no " + collective + " on the " + backend +
                       " backend (distlab-plan calibrate measures threads, shm and gloo)");
  return best->link;
}

double Profile::slowdown(double ranks, const std::string& precision) const {
  if (sharing.empty()) return ranks <= cores ? 1.0 : ranks / cores;
  auto has = [&](const std::string& name) {
    return std::any_of(sharing.begin(), sharing.end(), [&](const SharingPoint& p) { return p.precision == name; });
  };
  const std::string as = has(precision) ? precision : has("fp32") ? std::string("fp32") : sharing.front().precision;
  const SharingPoint* below = nullptr;
  const SharingPoint* above = nullptr;
  for (const SharingPoint& p : sharing) {
    if (p.precision != as) continue;
    if (p.ranks <= ranks && (below == nullptr || p.ranks > below->ranks)) below = &p;
    if (p.ranks >= ranks && (above == nullptr || p.ranks < above->ranks)) above = &p;
  }
  if (below == nullptr) return above->slowdown;
  if (above == nullptr) return below->slowdown * ranks / below->ranks;  // past the last: linear in the ranks
  if (above->ranks == below->ranks) return below->slowdown;
  const double t = (ranks - below->ranks) / double(above->ranks - below->ranks);
  return below->slowdown + t * (above->slowdown - below->slowdown);
}

bool Profile::has_pieces(const std::string& precision, const std::string& recompute) const {
  bool layer = false, ends = false;
  for (const PiecePoint& p : pieces)
    if (p.precision == precision) {
      layer = layer || (p.piece == "layer" && p.recompute == recompute && !p.cut());
      ends = ends || p.piece == "decoder";
    }
  return layer && ends;
}

namespace {

// The thread count measured nearest `threads` among `measured`.
int nearest_threads(const std::vector<int>& measured, int threads) {
  int best = measured.front();
  for (const int t : measured)
    if (std::abs(t - threads) < std::abs(best - threads)) best = t;
  return best;
}

// Whether `p` measured `piece` in this precision and policy, cut as `cut`.
bool measures(const PiecePoint& p, const std::string& piece, const std::string& precision,
              const std::string& recompute, Cut cut) {
  return p.piece == piece && p.precision == precision && p.recompute == recompute && p.tensor == cut.tensor &&
         p.context == cut.context;
}

}  // namespace

bool Profile::has_cut(const std::string& precision, const std::string& recompute, Cut cut) const {
  return cut_world(precision, recompute, cut, 1) > 0;
}

int Profile::cut_world(const std::string& precision, const std::string& recompute, Cut cut, int world) const {
  int best = 0;
  for (const PiecePoint& p : pieces) {
    if (!measures(p, "layer", precision, recompute, cut)) continue;
    const int w = p.measured_world();
    // The largest measured world up to `world`, else the smallest above it.
    const bool better = best == 0 || (w <= world ? (best > world || w > best) : (best > world && w < best));
    if (better) best = w;
  }
  return best;
}

PieceSeconds Profile::piece_seconds(const std::string& piece, const std::string& precision,
                                    const std::string& recompute, int threads, double tokens, Cut cut,
                                    int world) const {
  const int among = cut.tensor * cut.context > 1 ? cut_world(precision, recompute, cut, world) : 0;
  auto is = [&](const PiecePoint& p) {
    return measures(p, piece, precision, recompute, cut) && (among == 0 || p.measured_world() == among);
  };
  std::vector<int> measured;
  for (const PiecePoint& p : pieces)
    if (is(p)) measured.push_back(p.threads);
  if (measured.empty())
    throw ProfileError("the profile measured no " + piece + " in " + precision +
                       (piece == "layer" ? " with recompute " + recompute : std::string()) +
                       (cut.tensor * cut.context > 1 ? " cut over " + std::to_string(cut.tensor) + " tensor x " +
                                                           std::to_string(cut.context) + " context ranks"
                                                     : std::string()) +
                       " (distlab-plan calibrate measures them)");
  const int t = nearest_threads(measured, threads);
  std::vector<const PiecePoint*> points;
  for (const PiecePoint& p : pieces)
    if (is(p) && p.threads == t) points.push_back(&p);
  std::sort(points.begin(), points.end(), [](auto* a, auto* b) { return a->tokens < b->tokens; });
  if (points.size() == 1) {  // one size: proportional to the tokens
    const double scale = tokens / double(points[0]->tokens);
    return {points[0]->forward_s * scale, points[0]->backward_s * scale, points[0]->input_s * scale,
            points[0]->weight_s * scale};
  }
  // The segment holding `tokens`, or the first or last one extended.
  size_t i = 1;
  while (i + 1 < points.size() && tokens > double(points[i]->tokens)) ++i;
  const PiecePoint& a = *points[i - 1];
  const PiecePoint& b = *points[i];
  const double u = (tokens - double(a.tokens)) / double(b.tokens - a.tokens);
  auto along = [&](double ya, double yb) {
    const double y = ya + u * (yb - ya);
    // Below the smallest size: never under its share per token.
    const double floor = tokens < double(a.tokens) ? ya * tokens / double(a.tokens) : 0;
    return std::max(y, floor);
  };
  const bool split = a.weight_s > 0 && b.weight_s > 0;
  return {along(a.forward_s, b.forward_s), along(a.backward_s, b.backward_s),
          split ? along(a.input_s, b.input_s) : 0.0, split ? along(a.weight_s, b.weight_s) : 0.0};
}

double Profile::update_seconds(const std::string& piece, int threads) const {
  std::vector<int> measured;
  for (const UpdatePoint& u : updates)
    if (u.piece == piece) measured.push_back(u.threads);
  if (measured.empty()) return 0;
  const int t = nearest_threads(measured, threads);
  for (const UpdatePoint& u : updates)
    if (u.piece == piece && u.threads == t) return u.seconds;
  return 0;
}

std::string profile_json(const Profile& p) {
  json j;
  j["format"] = "distlab-profile";
  j["version"] = kProfileVersion;
  j["date"] = p.date;
  j["machine"] = p.machine;
  j["libtorch"] = p.libtorch;
  j["device"] = p.device;
  j["cores"] = p.cores;
  j["matmul"] = json::array();
  for (const MatmulPoint& m : p.matmul)
    j["matmul"].push_back({{"m", m.m}, {"k", m.k}, {"n", m.n}, {"precision", m.precision},
                           {"flops_per_second", m.flops_per_second}});
  j["elementwise_bytes_per_second"] = p.elementwise_bytes_per_second;
  j["op_seconds"] = p.op_seconds;
  j["links"] = json::array();
  for (const LinkPoint& l : p.links) {
    json link = {{"backend", l.backend}, {"collective", l.collective}, {"ranks", l.ranks},
                 {"alpha_s", l.link.alpha_s}, {"beta_s_per_byte", l.link.beta_s_per_byte}};
    if (l.world > 0) link["world"] = l.world;
    j["links"].push_back(link);
  }
  // Optional, and a list of at least one entry when present (the reader's
  // rule): a profile without it is written without it.
  for (const SharingPoint& s : p.sharing) {
    json point = {{"ranks", s.ranks}, {"slowdown", s.slowdown}};
    if (s.precision != "fp32") point["precision"] = s.precision;
    j["sharing"].push_back(point);
  }
  if (!p.pieces.empty()) j["pieces_model"] = p.pieces_model;
  for (const PiecePoint& q : p.pieces) {
    json piece = {{"piece", q.piece},   {"precision", q.precision}, {"recompute", q.recompute},
                  {"threads", q.threads}, {"tokens", q.tokens},       {"forward_s", q.forward_s},
                  {"backward_s", q.backward_s}};
    if (q.weight_s > 0) piece["input_s"] = q.input_s, piece["weight_s"] = q.weight_s;
    if (q.tensor > 1) piece["tensor"] = q.tensor;
    if (q.context > 1) piece["context"] = q.context;
    if (q.world > 0) piece["world"] = q.world;
    j["pieces"].push_back(piece);
  }
  for (const UpdatePoint& u : p.updates)
    j["updates"].push_back({{"piece", u.piece}, {"threads", u.threads}, {"seconds", u.seconds}});
  return j.dump(1) + "\n";
}

Profile parse_profile(const std::string& text, const std::string& what) {
  const Reader r{what};
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past a double's (1e400)
    r.fail(std::string("not JSON (") + e.what() + ")");
  }
  if (!j.is_object()) r.fail("not a profile: the top level is not an object");
  const auto format = j.find("format");
  if (format == j.end() || !format->is_string() || *format != "distlab-profile")
    r.fail("not a DistLab profile (no \"format\": \"distlab-profile\"; make one with distlab-plan calibrate)");
  const json& version = r.field(j, "version", "the profile");
  if (!version.is_number_integer() || version.get<int64_t>() != kProfileVersion)
    r.fail("profile version " + version.dump() + ", this distlab-plan reads version " +
           std::to_string(kProfileVersion) + " (run distlab-plan calibrate again)");
  Profile p;
  p.date = r.text(j, "date", "the profile");
  p.machine = r.text(j, "machine", "the profile");
  p.libtorch = r.text(j, "libtorch", "the profile");
  p.device = r.one_of(j, "device", "the profile", {"cpu", "cuda"});
  p.cores = static_cast<int>(r.count(j, "cores", "the profile", kMaxRanks));
  const json& matmul = r.array(j, "matmul", "the profile");
  for (size_t i = 0; i < matmul.size(); ++i) {
    const std::string where = "matmul[" + std::to_string(i) + "]";
    MatmulPoint m;
    m.m = r.count(matmul[i], "m", where);
    m.k = r.count(matmul[i], "k", where);
    m.n = r.count(matmul[i], "n", where);
    m.precision = r.text(matmul[i], "precision", where);
    if (m.precision != "fp32" && m.precision != "bf16" && m.precision != "fp16")
      r.fail("\"precision\" in " + where + " is \"" + m.precision + "\", not fp32, bf16 or fp16");
    m.flops_per_second = r.positive(matmul[i], "flops_per_second", where);
    p.matmul.push_back(m);
  }
  p.elementwise_bytes_per_second = r.positive(j, "elementwise_bytes_per_second", "the profile");
  p.op_seconds = r.non_negative(j, "op_seconds", "the profile");
  const json& links = r.array(j, "links", "the profile");
  for (size_t i = 0; i < links.size(); ++i) {
    const std::string where = "links[" + std::to_string(i) + "]";
    LinkPoint l;
    l.backend = r.text(links[i], "backend", where);
    l.collective = r.text(links[i], "collective", where);
    l.ranks = static_cast<int>(r.count(links[i], "ranks", where, kMaxRanks));
    l.world = links[i].contains("world") ? static_cast<int>(r.count(links[i], "world", where, kMaxRanks)) : 0;
    if (l.world > 0 && l.world < l.ranks)
      r.fail("\"world\" in " + where + " is " + std::to_string(l.world) + ", fewer than its " +
             std::to_string(l.ranks) + " ranks");
    l.link.alpha_s = r.non_negative(links[i], "alpha_s", where);
    l.link.beta_s_per_byte = r.non_negative(links[i], "beta_s_per_byte", where);
    p.links.push_back(l);
  }
  if (j.contains("sharing")) {
    const json& sharing = r.array(j, "sharing", "the profile");
    for (size_t i = 0; i < sharing.size(); ++i) {
      const std::string where = "sharing[" + std::to_string(i) + "]";
      SharingPoint s{static_cast<int>(r.count(sharing[i], "ranks", where, kMaxRanks)),
                     r.positive(sharing[i], "slowdown", where)};
      if (sharing[i].contains("precision")) s.precision = r.one_of(sharing[i], "precision", where, {"fp32", "bf16", "fp16"});
      p.sharing.push_back(s);
    }
  }
  if (j.contains("pieces")) {
    p.pieces_model = r.text(j, "pieces_model", "the profile (whose pieces are they?)");
    const json& pieces = r.array(j, "pieces", "the profile");
    for (size_t i = 0; i < pieces.size(); ++i) {
      const std::string where = "pieces[" + std::to_string(i) + "]";
      PiecePoint q;
      q.piece = r.one_of(pieces[i], "piece", where, {"embedding", "layer", "decoder"});
      q.precision = r.one_of(pieces[i], "precision", where, {"fp32", "bf16", "fp16"});
      q.recompute = r.one_of(pieces[i], "recompute", where, {"none", "full", "selective", "matmuls"});
      q.threads = static_cast<int>(r.count(pieces[i], "threads", where, kMaxRanks));
      q.tokens = r.count(pieces[i], "tokens", where);
      q.forward_s = r.positive(pieces[i], "forward_s", where);
      q.backward_s = r.positive(pieces[i], "backward_s", where);
      if (pieces[i].contains("weight_s") || pieces[i].contains("input_s")) {
        q.input_s = r.non_negative(pieces[i], "input_s", where);  // 0: the first stage's I has no input to return
        q.weight_s = r.positive(pieces[i], "weight_s", where);
      }
      if (pieces[i].contains("tensor")) q.tensor = static_cast<int>(r.count(pieces[i], "tensor", where, kMaxRanks));
      if (pieces[i].contains("context")) q.context = static_cast<int>(r.count(pieces[i], "context", where, kMaxRanks));
      if (pieces[i].contains("world")) q.world = static_cast<int>(r.count(pieces[i], "world", where, kMaxRanks));
      if (q.cut() && q.piece != "layer") r.fail(where + " cuts a " + q.piece + ": only a layer is cut");
      if (q.world > 0 && q.world % (q.tensor * q.context) != 0)
        r.fail(where + " was measured among " + std::to_string(q.world) + " ranks, not a multiple of its " +
               std::to_string(q.tensor * q.context));
      for (const PiecePoint& other : p.pieces)
        if (measures(other, q.piece, q.precision, q.recompute, {q.tensor, q.context}) && other.threads == q.threads &&
            other.tokens == q.tokens && other.measured_world() == q.measured_world())
          r.fail(where + " measures again what an earlier entry measured (" + q.piece + ", " + q.precision + ", " +
                 q.recompute + ", " + std::to_string(q.threads) + " threads, " + std::to_string(q.tokens) + " tokens" +
                 (q.cut() ? ", " + std::to_string(q.tensor) + " x " + std::to_string(q.context) + " cut" : "") + ")");
      p.pieces.push_back(q);
    }
  }
  if (j.contains("updates")) {
    const json& updates = r.array(j, "updates", "the profile");
    for (size_t i = 0; i < updates.size(); ++i) {
      const std::string where = "updates[" + std::to_string(i) + "]";
      p.updates.push_back({r.one_of(updates[i], "piece", where, {"embedding", "layer", "decoder"}),
                           static_cast<int>(r.count(updates[i], "threads", where, kMaxRanks)),
                           r.positive(updates[i], "seconds", where)});
    }
  }
  return p;
}

Profile read_profile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ProfileError("profile " + path + ": cannot be opened (make one with distlab-plan calibrate -o " + path + ")");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return parse_profile(bytes.str(), "profile " + path);
}

void write_profile(const Profile& profile, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << profile_json(profile);
  if (!out) throw ProfileError("profile " + path + ": cannot be written");
}

}  // namespace distlab::planner
