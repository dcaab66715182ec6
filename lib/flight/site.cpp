#include "flight/site.hpp"

#include <vector>

namespace distlab::flight {
namespace {
// Each thread rank and each communication thread has its own stack.
thread_local std::vector<std::string> labels;
}  // namespace

Site::Site(std::string label) { labels.push_back(std::move(label)); }
Site::~Site() { labels.pop_back(); }

std::string current_site() {
  std::string joined;
  for (const std::string& label : labels)
    if (!label.empty()) joined += (joined.empty() ? "" : " / ") + label;
  return joined;
}

}  // namespace distlab::flight
