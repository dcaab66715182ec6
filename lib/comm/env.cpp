#include "comm/env.hpp"

#include <climits>
#include <optional>
#include <vector>

#include "comm/errors.hpp"

extern char** environ;

namespace distlab::comm {
namespace {

// One variable as found: its name (for messages) and its text, if set.
struct Field {
  std::string name;
  std::optional<std::string> text;
};

// What a source says, before any check: the same shape for torchrun, Slurm
// and Open MPI, so one function checks all three.
struct Raw {
  std::string source;
  Field rank, world_size, local_rank, local_world_size, master_addr, restart_count;
};

[[noreturn]] void fail(const std::string& message) { throw SetupError("environment: " + message); }

Field field(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return {name, std::nullopt};
  return {name, it->second};
}

// The first of `names` that is set; the first name when none is.
Field first_field(const Environment& env, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    Field f = field(env, name);
    if (f.text) return f;
  }
  return {names.front(), std::nullopt};
}

bool is_whole_number(const std::string& text) {
  if (text.empty() || text.size() > 9) return false;  // 9 digits always fit an int
  for (char c : text)
    if (c < '0' || c > '9') return false;
  return true;
}

int number(const Field& f, const std::string& meaning) {
  if (!is_whole_number(*f.text)) fail(f.name + "='" + *f.text + "' is not a whole number; set it to " + meaning);
  return std::stoi(*f.text);
}

int required_number(const Field& f, const std::string& source, const std::string& meaning) {
  if (!f.text) fail(f.name + " is missing (" + source + " variables are set); set it to " + meaning);
  return number(f, meaning);
}

// Slurm's task counts per node: "2(x3),1" means 2,2,2,1. Returns the count of
// node `node_id`.
int tasks_on_node(const Field& f, int node_id) {
  const std::string& text = *f.text;
  const std::string meaning = "Slurm's form like 4 or 2(x3),1";
  std::vector<int> counts;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    int repeat = 1;
    size_t paren = item.find("(x");
    if (paren != std::string::npos && item.back() == ')') {
      repeat = number({f.name, item.substr(paren + 2, item.size() - paren - 3)}, meaning);
      item = item.substr(0, paren);
    }
    int count = number({f.name, item}, meaning);
    for (int i = 0; i < repeat && static_cast<int>(counts.size()) <= node_id; ++i) counts.push_back(count);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (node_id >= static_cast<int>(counts.size()))
    fail(f.name + "='" + text + "' lists fewer nodes than SLURM_NODEID=" + std::to_string(node_id) +
         "; check the allocation");
  return counts[node_id];
}

Raw torchrun_raw(const Environment& env) {
  return {"torchrun",
          field(env, "RANK"),
          field(env, "WORLD_SIZE"),
          field(env, "LOCAL_RANK"),
          field(env, "LOCAL_WORLD_SIZE"),
          field(env, "MASTER_ADDR"),
          first_field(env, {"RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT"})};
}

Raw slurm_raw(const Environment& env) {
  Raw raw{"slurm",
          field(env, "SLURM_PROCID"),
          first_field(env, {"SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_NPROCS"}),
          field(env, "SLURM_LOCALID"),
          first_field(env, {"SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}),
          first_field(env, {"MASTER_ADDR", "SLURM_LAUNCH_NODE_IPADDR"}),
          first_field(env, {"RESTART_COUNT", "SLURM_RESTART_COUNT"})};
  // The per-node list becomes the one count of this node.
  if (raw.local_world_size.text) {
    Field node = field(env, "SLURM_NODEID");
    int node_id = node.text ? number(node, "this node's index in the allocation") : 0;
    raw.local_world_size.text = std::to_string(tasks_on_node(raw.local_world_size, node_id));
  }
  return raw;
}

Raw openmpi_raw(const Environment& env) {
  return {"openmpi",
          field(env, "OMPI_COMM_WORLD_RANK"),
          field(env, "OMPI_COMM_WORLD_SIZE"),
          field(env, "OMPI_COMM_WORLD_LOCAL_RANK"),
          field(env, "OMPI_COMM_WORLD_LOCAL_SIZE"),
          field(env, "MASTER_ADDR"),
          field(env, "RESTART_COUNT")};
}

std::string host(const Field& f) {
  if (f.text->empty() || f.text->find_first_of(" \t\n") != std::string::npos)
    fail(f.name + "='" + *f.text + "' is not a host name or address; set it to the host of rank 0");
  return *f.text;
}

// Every check that holds for any source. Local values default to "all ranks
// on this node" when the source leaves them out.
WorldInfo checked(const Raw& raw) {
  WorldInfo w;
  w.source = raw.source;
  w.rank = required_number(raw.rank, raw.source, "this process's rank, 0.." + raw.world_size.name + "-1");
  w.world_size = required_number(raw.world_size, raw.source, "the number of processes in the job");
  if (w.world_size == 0)
    fail(raw.world_size.name + "=0, but a job has at least one process; set it to the number of processes");
  if (w.rank >= w.world_size)
    fail(raw.rank.name + "=" + std::to_string(w.rank) + " is not below " + raw.world_size.name + "=" +
         std::to_string(w.world_size) + " (ranks run 0.." + std::to_string(w.world_size - 1) +
         "); check the process count given to the launcher");

  w.local_world_size =
      raw.local_world_size.text ? number(raw.local_world_size, "the number of processes on this node") : w.world_size;
  if (w.local_world_size == 0)
    fail(raw.local_world_size.name + "=0, but this node runs at least this process; set it to the processes per node");
  if (w.local_world_size > w.world_size)
    fail(raw.local_world_size.name + "=" + std::to_string(w.local_world_size) + " is larger than " +
         raw.world_size.name + "=" + std::to_string(w.world_size) +
         "; set it to the processes on this node, at most the job's");
  w.local_rank =
      raw.local_rank.text ? number(raw.local_rank, "this process's index on its node") : w.rank % w.local_world_size;
  if (w.local_rank >= w.local_world_size)
    fail(raw.local_rank.name + "=" + std::to_string(w.local_rank) + " is not below " + raw.local_world_size.name + "=" +
         std::to_string(w.local_world_size) + "; check the processes per node given to the launcher");

  if (raw.master_addr.text) {
    w.master_addr = host(raw.master_addr);
  } else if (w.local_world_size < w.world_size) {
    fail("MASTER_ADDR is missing and the " + std::to_string(w.world_size) + " ranks span several nodes (" +
         std::to_string(w.local_world_size) + " here); set MASTER_ADDR to the address of rank 0's node");
  }
  if (raw.restart_count.text) w.restart_count = number(raw.restart_count, "the launcher's restart count, 0 or more");
  return w;
}

}  // namespace

Environment current_environment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string line(*entry);
    auto eq = line.find('=');
    if (eq != std::string::npos) env.emplace(line.substr(0, eq), line.substr(eq + 1));
  }
  return env;
}

WorldInfo world_from(const Environment& env) {
  WorldInfo w;
  if (env.count("RANK") || env.count("WORLD_SIZE"))
    w = checked(torchrun_raw(env));
  else if (env.count("SLURM_PROCID"))
    w = checked(slurm_raw(env));
  else if (env.count("OMPI_COMM_WORLD_RANK") || env.count("OMPI_COMM_WORLD_SIZE"))
    w = checked(openmpi_raw(env));
  else if (env.count("MASTER_ADDR"))
    w.master_addr = host(field(env, "MASTER_ADDR"));

  Field port = field(env, "MASTER_PORT");
  if (port.text) {
    if (!is_whole_number(*port.text) || std::stoi(*port.text) < 1 || std::stoi(*port.text) > 65535)
      fail("MASTER_PORT='" + *port.text + "' is not a TCP port; set it to a number in 1..65535");
    w.master_port = std::stoi(*port.text);
  }

  Field agent = field(env, "TORCHELASTIC_USE_AGENT_STORE");
  if (agent.text) {
    // PyTorch compares with str(True); lower case and 1/0 are accepted too.
    const std::string& v = *agent.text;
    if (v == "True" || v == "true" || v == "1")
      w.agent_store = true;
    else if (!(v == "False" || v == "false" || v == "0" || v.empty()))
      fail(agent.name + "='" + v + "' is neither True nor False; set it to True when the launcher hosts the store at "
           "MASTER_ADDR:MASTER_PORT (torchrun does), else False");
  }
  if (w.agent_store) w.store_prefix = "/worker/attempt_" + std::to_string(w.restart_count);
  return w;
}

}  // namespace distlab::comm
