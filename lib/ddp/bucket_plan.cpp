#include "ddp/bucket_plan.hpp"

#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace distlab::ddp {

void check_order(const std::vector<int>& order, int n) {
  if (static_cast<int>(order.size()) != n)
    throw std::invalid_argument("bucket order lists " + std::to_string(order.size()) + " parameters, expected " +
                                std::to_string(n));
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int i : order) {
    if (i < 0 || i >= n || seen[static_cast<size_t>(i)])
      throw std::invalid_argument("bucket order is not a permutation of 0.." + std::to_string(n - 1) + ": " +
                                  std::to_string(i) + (i < 0 || i >= n ? " is out of range" : " appears twice"));
    seen[static_cast<size_t>(i)] = true;
  }
}

std::vector<int> reverse_registration_order(int n) {
  std::vector<int> order;
  for (int i = n - 1; i >= 0; --i) order.push_back(i);
  return order;
}

BucketPlan plan_buckets(const std::vector<ParamInfo>& params, const std::vector<int>& order, int64_t first_bytes,
                        int64_t cap_bytes) {
  check_order(order, static_cast<int>(params.size()));
  BucketPlan plan;
  plan.params = params;
  plan.order = order;
  // One open bucket per (dtype, device); a bucket's position in the plan is
  // where it was opened, so buckets follow the order of their first gradient.
  struct Open {
    int index = -1;     // into plan.buckets
    int filled = 0;     // buckets of this key closed so far (0: next limit is first_bytes)
  };
  std::map<std::pair<std::string, std::string>, Open> open;
  for (int i : order) {
    const ParamInfo& p = params[static_cast<size_t>(i)];
    Open& o = open[{p.dtype, p.device}];
    if (o.index < 0) {
      o.index = static_cast<int>(plan.buckets.size());
      plan.buckets.push_back({});
      plan.buckets.back().limit = o.filled == 0 ? first_bytes : cap_bytes;
    }
    Bucket& b = plan.buckets[static_cast<size_t>(o.index)];
    b.params.push_back(i);
    b.bytes += p.bytes();
    b.numel += p.numel;
    if (cap_bytes <= 0 || b.bytes >= b.limit) {  // full: the next gradient opens a new one
      o.index = -1;
      ++o.filled;
    }
  }
  return plan;
}

std::vector<int> BucketPlan::bucket_of() const {
  std::vector<int> out(params.size(), -1);
  for (size_t b = 0; b < buckets.size(); ++b)
    for (int i : buckets[b].params) out[static_cast<size_t>(i)] = static_cast<int>(b);
  return out;
}

std::vector<int64_t> BucketPlan::offset_of() const {
  std::vector<int64_t> out(params.size(), 0);
  for (const Bucket& b : buckets) {
    int64_t offset = 0;
    for (int i : b.params) {
      out[static_cast<size_t>(i)] = offset;
      offset += params[static_cast<size_t>(i)].numel;
    }
  }
  return out;
}

namespace {
std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / static_cast<double>(kMiB));
  return text;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}
}  // namespace

std::string BucketPlan::text() const {
  std::ostringstream out;
  for (size_t b = 0; b < buckets.size(); ++b) {
    out << "bucket " << b << "  " << mib(buckets[b].bytes) << "  " << buckets[b].params.size() << " params:";
    for (int i : buckets[b].params) out << " " << params[static_cast<size_t>(i)].name;
    out << "\n";
  }
  return out.str();
}

std::string BucketPlan::json() const {
  std::ostringstream out;
  out << "{\"buckets\":[";
  for (size_t b = 0; b < buckets.size(); ++b) {
    out << (b ? "," : "") << "{\"bytes\":" << buckets[b].bytes << ",\"params\":[";
    for (size_t k = 0; k < buckets[b].params.size(); ++k) out << (k ? "," : "") << buckets[b].params[k];
    out << "]}";
  }
  out << "],\"names\":[";
  for (size_t i = 0; i < params.size(); ++i) out << (i ? "," : "") << quoted(params[i].name);
  out << "],\"sizes\":[";
  for (size_t i = 0; i < params.size(); ++i) out << (i ? "," : "") << params[i].bytes();
  out << "]}";
  return out.str();
}

}  // namespace distlab::ddp
