#include <sstream>

#include "collectives/plan.hpp"

namespace distlab::collectives {

std::string to_text(const Plan& plan) {
  std::ostringstream out;
  out << to_string(plan.collective) << "/" << to_string(plan.algorithm) << ": " << plan.world_size << " ranks, ";
  if (plan.collective == Collective::kBroadcast || plan.collective == Collective::kReduce)
    out << "root " << plan.root << ", ";
  out << plan.count << " elements of " << plan.elem_bytes << " bytes, " << plan.steps.size()
      << (plan.steps.size() == 1 ? " step\n" : " steps\n");
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const Step& step = plan.steps[s];
    out << "step " << s << " (" << step.phase << "):";
    for (size_t i = 0; i < step.transfers.size(); ++i) {
      const Transfer& t = step.transfers[i];
      out << (i == 0 ? " " : ", ") << t.src << "->" << t.dst << " ";
      if (plan.collective == Collective::kAllToAll)
        out << "block";
      else if (t.chunk < 0)
        out << "all";
      else if (t.chunks == 1)
        out << "chunk " << t.chunk;
      else
        out << "chunks " << t.chunk << "-" << t.chunk + t.chunks - 1;
      out << " " << t.range.count * plan.elem_bytes << " B" << (t.reduce ? " added" : "");
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace distlab::collectives
