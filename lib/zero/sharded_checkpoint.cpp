#include "zero/sharded_checkpoint.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "ddp/replicas.hpp"
#include "zero/optimizer_state.hpp"
#include "zero/shard_segments.hpp"

namespace distlab::zero {
namespace {

using checkpoint::CheckpointError;
using checkpoint::CheckpointPart;
using checkpoint::Checkpointer;

// What saving and loading need of any stage.
struct Target {
  ShardedOptimizer& sharded;
  torch::nn::Module& module;
  // ZeRO-1/2: every rank holds whole parameters and its chunks are views of
  // them. ZeRO-3: only the chunks; whole parameters take an all-gather.
  bool whole;
  std::function<std::vector<at::Tensor>()> full_parameters;  // ZeRO-3: every rank calls it
};

std::string who_of(const ShardedOptimizer& s) { return s.comm().self() + ": " + s.who() + " checkpoint"; }

// ZeRO-1/2 take the model as an argument: it must be the one they shard
// (its parameters are the very tensors the stage made views of).
void check_same_model(const Target& t) {
  if (!t.whole) return;
  const ddp::NamedTensors named = ddp::trainable_parameters(t.module);
  const auto& params = t.sharded.params();
  bool same = named.size() == params.size();
  for (size_t i = 0; same && i < named.size(); ++i)
    same = named[i].second.unsafeGetTensorImpl() == params[i].unsafeGetTensorImpl();
  if (!same)
    throw CheckpointError(who_of(t.sharded) + ": the model passed is not the one " + t.sharded.who() +
                          " was built on; pass that model");
}

// ---- Describing the model and the layout as text ----------------------------

std::string shape_text(const at::Tensor& t) {
  std::string text;
  for (int64_t d : t.sizes()) text += (text.empty() ? "" : "x") + std::to_string(d);
  return text.empty() ? "scalar" : text;
}

// "name\tshape\tdtype", one per parameter in registration order.
std::vector<std::string> parameter_lines(const ShardedOptimizer& s) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < s.params().size(); ++i)
    lines.push_back(s.names()[i] + "\t" + shape_text(s.params()[i]) + "\t" +
                    c10::toString(s.params()[i].scalar_type()));
  return lines;
}

std::string joined_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string name_in(const std::string& line) { return line.substr(0, line.find('\t')); }
std::string shape_in(const std::string& line) {
  const auto tab = line.find('\t');
  std::string rest = tab == std::string::npos ? "" : line.substr(tab + 1);
  std::replace(rest.begin(), rest.end(), '\t', ' ');
  return rest;
}

// The first place the checkpoint's parameter list and this model's part; "" when equal.
std::string first_difference(const std::vector<std::string>& saved, const std::vector<std::string>& mine) {
  for (size_t i = 0; i < std::max(saved.size(), mine.size()); ++i) {
    if (i >= saved.size())
      return "this model's parameter '" + name_in(mine[i]) + "' (" + shape_in(mine[i]) +
             ") is not in the checkpoint (it has " + std::to_string(saved.size()) + " parameters, the model " +
             std::to_string(mine.size()) + ")";
    if (i >= mine.size())
      return "the checkpoint's parameter '" + name_in(saved[i]) + "' (" + shape_in(saved[i]) +
             ") is not in this model (it has " + std::to_string(mine.size()) + " parameters, the checkpoint " +
             std::to_string(saved.size()) + ")";
    if (saved[i] == mine[i]) continue;
    if (name_in(saved[i]) != name_in(mine[i]))
      return "parameter " + std::to_string(i) + " is '" + name_in(saved[i]) + "' in the checkpoint, '" +
             name_in(mine[i]) + "' in this model";
    return "parameter '" + name_in(mine[i]) + "' is " + shape_in(saved[i]) + " in the checkpoint, " +
           shape_in(mine[i]) + " in this model";
  }
  return "";
}

// One line per bucket: its parameters' indices in packing order.
std::string buckets_text(const ShardLayout& layout) {
  std::string text;
  for (const ddp::Bucket& b : layout.plan.buckets) {
    std::string line;
    for (int i : b.params) line += (line.empty() ? "" : " ") + std::to_string(i);
    text += line + "\n";
  }
  return text;
}

// The writers' plan back from buckets_text, over this model's parameters
// (already checked equal to the checkpoint's).
ddp::BucketPlan plan_from(const std::string& text, const std::vector<ddp::ParamInfo>& params, const std::string& file) {
  ddp::BucketPlan plan;
  plan.params = params;
  std::vector<int> seen(params.size(), 0);
  for (const std::string& line : lines_of(text)) {
    ddp::Bucket bucket;
    std::istringstream in(line);
    for (long long i = 0; in >> i;) {
      if (i < 0 || i >= static_cast<long long>(params.size()) || seen[static_cast<size_t>(i)]++)
        throw CheckpointError(file + ": its bucket list names parameter " + std::to_string(i) +
                              " twice or out of range (not a ZeRO checkpoint of this model?)");
      bucket.params.push_back(static_cast<int>(i));
      plan.order.push_back(static_cast<int>(i));
      bucket.numel += params[static_cast<size_t>(i)].numel;
      bucket.bytes += params[static_cast<size_t>(i)].bytes();
    }
    bucket.limit = bucket.bytes;
    plan.buckets.push_back(bucket);
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (seen[i] == 0)
      throw CheckpointError(file + ": its bucket list leaves out parameter '" + params[i].name + "'");
  return plan;
}

// ---- Reading a part's entries, each error naming the file -------------------

const std::string& text_of(const CheckpointPart& part, const std::string& key, const std::string& file) {
  const auto it = part.texts.find(key);
  if (it == part.texts.end()) throw CheckpointError(file + " has no text '" + key + "' (not a ZeRO checkpoint?)");
  return it->second;
}
int64_t int_of(const CheckpointPart& part, const std::string& key, const std::string& file) {
  const auto it = part.ints.find(key);
  if (it == part.ints.end()) throw CheckpointError(file + " has no integer '" + key + "' (not a ZeRO checkpoint?)");
  return it->second;
}
// (length,): checked here so that a narrow() below never reads past it.
const at::Tensor& tensor_of(const CheckpointPart& part, const std::string& key, int64_t length, const std::string& file) {
  const auto it = part.tensors.find(key);
  if (it == part.tensors.end()) throw CheckpointError(file + " has no tensor '" + key + "'");
  if (it->second.dim() != 1 || it->second.numel() != length)
    throw CheckpointError(file + ": tensor '" + key + "' has " + std::to_string(it->second.numel()) +
                          " elements, its segment " + std::to_string(length));
  return it->second;
}

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// ---- Every rank learns whether every rank succeeded --------------------------

// One all-reduce of a (size,) vector holding 1 at each failed rank: a rank
// that failed throws its own error, the others one naming the failed ranks.
// Every rank calls it; a rank that never does makes the others' wait end with
// the communicator's timeout naming it.
void agree(comm::Communicator& comm, const std::string& error, const std::string& what) {
  at::Tensor failed = at::zeros({comm.size()}, at::TensorOptions().dtype(at::kFloat).device(comm.device()));
  if (!error.empty()) failed[comm.rank()].fill_(1);
  comm.native_all_reduce(failed, comm::ReduceOp::kSum);
  if (!error.empty()) throw CheckpointError(error);
  const at::Tensor flags = failed.cpu();
  std::string ranks;
  for (int r = 0; r < comm.size(); ++r)
    if (flags[r].item<float>() > 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  if (!ranks.empty())
    throw CheckpointError(comm.self() + ": " + what + ": rank(s) " + ranks +
                          " failed (their errors name the file and why); nothing was changed");
}

// ---- Saving -----------------------------------------------------------------

// The whole model as a state_dict: the trainable parameters whole (ZeRO-3:
// `full`, gathered), frozen parameters and buffers as the module holds them.
std::map<std::string, at::Tensor> whole_model(const Target& t, const std::vector<at::Tensor>& full) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < t.sharded.names().size(); ++i) index[t.sharded.names()[i]] = i;
  std::map<std::string, at::Tensor> model;
  for (const auto& item : t.module.named_parameters(/*recurse=*/true)) {
    const auto it = index.find(item.key());
    // clone(): a view of a bucket's flat buffer would be saved with the whole buffer.
    model[item.key()] = it != index.end() && !t.whole ? full[it->second] : item.value().detach().clone();
  }
  for (const auto& item : t.module.named_buffers(/*recurse=*/true)) model[item.key()] = item.value().detach().clone();
  return model;
}

CheckpointPart shard_part(const Target& t, const std::vector<at::Tensor>& full) {
  ShardedOptimizer& s = t.sharded;
  const std::string who = who_of(s);
  const int rank = s.comm().rank();
  const ShardLayout& layout = s.layout();
  const OptimizerKind kind = optimizer_kind(s.optimizer(), who);
  CheckpointPart part;
  if (rank == 0) part.model = whole_model(t, full);
  part.texts["zero/parameters"] = joined_lines(parameter_lines(s));
  part.texts["zero/buckets"] = buckets_text(layout);
  part.texts["zero/stage"] = s.who();
  part.texts["zero/optimizer"] = to_string(kind);
  part.ints["zero/writers"] = s.comm().size();
  part.ints["zero/rank"] = rank;

  // Every chunk was stepped together: all have state or none, one step count, the same fields.
  std::vector<ElementState> states;
  for (const at::Tensor& chunk : s.shard()) states.push_back(element_state(s.optimizer(), kind, chunk));
  std::string fields;
  for (const auto& item : states.empty() ? std::map<std::string, at::Tensor>{} : states.front().fields)
    fields += (fields.empty() ? "" : " ") + item.first;
  for (const ElementState& state : states)
    if (state.present != states.front().present || state.step != states.front().step ||
        state.fields.size() != states.front().fields.size())
      throw CheckpointError(who + ": the optimizer's state differs between this rank's chunks (were they stepped "
                                  "apart?); save after a step");
  const bool present = !states.empty() && states.front().present;
  part.ints["optimizer/has_state"] = present ? 1 : 0;
  part.ints["optimizer/step"] = present ? states.front().step : 0;
  part.texts["optimizer/fields"] = present ? fields : "";

  for (const Segment& seg : shard_segments(layout, rank)) {
    const std::string& name = layout.plan.params[static_cast<size_t>(seg.param)].name;
    const at::Tensor& chunk = s.shard()[static_cast<size_t>(seg.bucket)];
    part.ints["shard/" + name + "/offset"] = seg.offset;
    part.tensors["shard/" + name] = chunk.detach().narrow(0, seg.chunk_offset, seg.length).clone();
    if (!present) continue;
    for (const auto& [field, tensor] : states[static_cast<size_t>(seg.bucket)].fields)
      part.tensors["optimizer/" + field + "/" + name] = tensor.detach().narrow(0, seg.chunk_offset, seg.length).clone();
  }
  return part;
}

std::string save_target(const std::string& dir, int keep_last, std::int64_t step, const Target& t) {
  comm::Communicator& comm = t.sharded.comm();
  // ZeRO-3: gathering the whole model takes every rank; rank 0 writes it.
  const std::vector<at::Tensor> full = t.whole ? std::vector<at::Tensor>{} : t.full_parameters();
  std::string error, where;
  try {
    check_same_model(t);
    const CheckpointPart part = shard_part(t, full);
    where = Checkpointer(dir, comm.size(), keep_last).save(step, comm.rank(), part);
  } catch (const std::exception& e) {
    error = who_of(t.sharded) + ": " + e.what();
  }
  // Also the barrier after which every part is on disk.
  agree(comm, error, t.sharded.who() + " checkpoint of step " + std::to_string(step));
  return where;
}

// ---- Loading ----------------------------------------------------------------

// What this rank takes, gathered before anything in the model changes.
struct Loaded {
  std::vector<at::Tensor> chunks;                // per bucket (chunk count,)
  std::vector<ElementState> states;                // per bucket
  std::map<std::string, at::Tensor> unsharded;   // frozen parameters and buffers, by name
};

// The writers' parts, read on first use, each checked against the first.
class Parts {
 public:
  Parts(const ShardedCheckpointer& names, std::int64_t step, int writers, int keep_last)
      : names_(names), step_(step), writers_(writers), checkpointer_(names.dir(), writers, keep_last) {}

  int writers() const { return writers_; }
  std::string file(int w) const { return names_.state_file(step_, w); }

  // Read and CRC-checked by the Checkpointer; its own header checked.
  const CheckpointPart& get(int w) {
    auto it = parts_.find(w);
    if (it != parts_.end()) return it->second;
    CheckpointPart part = checkpointer_.load(step_, w);
    const std::string f = file(w);
    if (int_of(part, "zero/writers", f) != writers_ || int_of(part, "zero/rank", f) != w)
      throw CheckpointError(f + " says it is rank " + std::to_string(int_of(part, "zero/rank", f)) + " of " +
                            std::to_string(int_of(part, "zero/writers", f)) + ", its manifest rank " +
                            std::to_string(w) + " of " + std::to_string(writers_) + " (files mixed up?)");
    if (!parts_.empty()) {
      const int first = parts_.begin()->first;
      const CheckpointPart& head = parts_.begin()->second;
      for (const char* key : {"zero/parameters", "zero/buckets", "zero/optimizer", "optimizer/fields"})
        if (text_of(part, key, f) != text_of(head, key, file(first)))
          throw CheckpointError(f + " and " + file(first) + " differ in '" + key + "' (parts of different jobs?)");
      for (const char* key : {"optimizer/has_state", "optimizer/step"})
        if (int_of(part, key, f) != int_of(head, key, file(first)))
          throw CheckpointError(f + " and " + file(first) + " differ in '" + key + "' (" +
                                std::to_string(int_of(part, key, f)) + " and " +
                                std::to_string(int_of(head, key, file(first))) + ")");
    }
    return parts_.emplace(w, std::move(part)).first->second;
  }

 private:
  const ShardedCheckpointer& names_;
  std::int64_t step_;
  int writers_;
  Checkpointer checkpointer_;
  std::map<int, CheckpointPart> parts_;
};

// Writer w's part must hold exactly the segments its layout gives it.
void check_segments(const CheckpointPart& part, const std::string& file, const std::vector<Segment>& segments,
                    const ddp::BucketPlan& plan, const std::vector<std::string>& fields) {
  size_t shards = 0;
  for (const auto& item : part.tensors) shards += item.first.rfind("shard/", 0) == 0 ? 1 : 0;
  if (shards != segments.size())
    throw CheckpointError(file + " holds " + std::to_string(shards) + " parameter segments, its layout " +
                          std::to_string(segments.size()));
  for (const Segment& seg : segments) {
    const std::string& name = plan.params[static_cast<size_t>(seg.param)].name;
    const int64_t offset = int_of(part, "shard/" + name + "/offset", file);
    if (offset != seg.offset)
      throw CheckpointError(file + ": its segment of '" + name + "' starts at " + std::to_string(offset) +
                            ", its layout says " + std::to_string(seg.offset));
    tensor_of(part, "shard/" + name, seg.length, file);
    for (const std::string& field : fields) tensor_of(part, "optimizer/" + field + "/" + name, seg.length, file);
  }
}

Loaded read_shard(const ShardedCheckpointer& self, int keep_last, std::int64_t step, const Target& t) {
  ShardedOptimizer& s = t.sharded;
  comm::Communicator& comm = s.comm();
  Parts parts(self, step, self.writers(step), keep_last);
  const int writers = parts.writers();
  // The layout below has a part per writer: a count that no files back
  // (a damaged or hostile manifest) is refused before it costs anything.
  if (!std::filesystem::exists(self.manifest_file(step, writers - 1)))
    throw CheckpointError(self.folder(step) + ": stage " + std::to_string(writers - 1) +
                          " has no manifest (its writer has not finished, or stopped; stage 0's says " +
                          std::to_string(writers) + " ranks wrote it)");

  // 1. One part, likely to overlap this rank's shard: the model and the writers' layout.
  const int first = std::min(writers - 1, static_cast<int>(int64_t{comm.rank()} * writers / comm.size()));
  const CheckpointPart& head = parts.get(first);
  const std::string head_file = parts.file(first);
  const std::string difference =
      first_difference(lines_of(text_of(head, "zero/parameters", head_file)), parameter_lines(s));
  if (!difference.empty())
    throw CheckpointError(self.folder(step) + " does not fit this model: " + difference +
                          " (was it written by another model?)");
  const OptimizerKind kind = optimizer_kind(s.optimizer(), who_of(s));
  if (text_of(head, "zero/optimizer", head_file) != to_string(kind))
    throw CheckpointError(head_file + " holds the state of " + text_of(head, "zero/optimizer", head_file) +
                          ", this rank's optimizer is " + to_string(kind));
  const ddp::BucketPlan& plan = s.layout().plan;
  const ShardLayout written = make_shard_layout(plan_from(text_of(head, "zero/buckets", head_file), plan.params, head_file), writers);
  const bool has_state = int_of(head, "optimizer/has_state", head_file) != 0;
  const std::vector<std::string> fields = words_of(text_of(head, "optimizer/fields", head_file));

  // 2. Fresh chunks and state, to be filled overlap by overlap.
  Loaded out;
  const at::TensorOptions options = s.tensor_options();
  for (int b = 0; b < s.layout().buckets(); ++b) {
    const int64_t count = s.layout().chunk(b, comm.rank()).count;
    out.chunks.push_back(at::empty({count}, options));
    ElementState state{has_state, has_state ? int_of(head, "optimizer/step", head_file) : 0, {}};
    for (const std::string& field : fields) state.fields[field] = at::empty({count}, options);
    out.states.push_back(state);
  }

  // 3. Each of my segments from the writers' segments it meets.
  std::vector<std::vector<Segment>> theirs;
  for (int w = 0; w < writers; ++w) theirs.push_back(shard_segments(written, w));
  std::set<int> checked;
  torch::NoGradGuard no_grad;
  for (const Segment& mine : shard_segments(s.layout(), comm.rank())) {
    const std::string& name = plan.params[static_cast<size_t>(mine.param)].name;
    int64_t covered = 0;
    for (int w = 0; w < writers; ++w)
      for (const Segment& their : theirs[static_cast<size_t>(w)]) {
        const Overlap o = overlap(mine, their);
        if (o.length == 0) continue;
        const CheckpointPart& part = parts.get(w);
        if (checked.insert(w).second) check_segments(part, parts.file(w), theirs[static_cast<size_t>(w)], plan, fields);
        const int64_t from = o.offset - their.offset, to = mine.chunk_offset + (o.offset - mine.offset);
        auto take = [&](at::Tensor& into, const std::string& key) {
          into.narrow(0, to, o.length).copy_(tensor_of(part, key, their.length, parts.file(w)).narrow(0, from, o.length));
        };
        take(out.chunks[static_cast<size_t>(mine.bucket)], "shard/" + name);
        for (const std::string& field : fields)
          take(out.states[static_cast<size_t>(mine.bucket)].fields[field], "optimizer/" + field + "/" + name);
        covered += o.length;
      }
    // The writers' segments tile each parameter once, so full cover is exactly `length`.
    if (covered != mine.length)
      throw CheckpointError(self.folder(step) + ": the writers' shards cover " + std::to_string(covered) + " of the " +
                            std::to_string(mine.length) + " elements of '" + name + "' this rank needs");
  }

  // 4. What is not sharded: from the whole model that rank 0 wrote.
  std::set<std::string> sharded_names(s.names().begin(), s.names().end());
  std::vector<std::string> unsharded;
  for (const auto& item : t.module.named_parameters(/*recurse=*/true))
    if (!sharded_names.count(item.key())) unsharded.push_back(item.key());
  for (const auto& item : t.module.named_buffers(/*recurse=*/true)) unsharded.push_back(item.key());
  if (!unsharded.empty()) {
    const CheckpointPart& zero = parts.get(0);
    const auto mine = t.module.named_parameters(true);
    const auto buffers = t.module.named_buffers(true);
    for (const std::string& name : unsharded) {
      const auto it = zero.model.find(name);
      const at::Tensor* target = mine.find(name) != nullptr ? mine.find(name) : buffers.find(name);
      if (it == zero.model.end() || it->second.sizes() != target->sizes())
        throw CheckpointError(self.model_file(step) + " does not fit this model: '" + name + "' is " +
                              (it == zero.model.end() ? "missing" : shape_text(it->second)) + ", the model's " +
                              shape_text(*target));
      out.unsharded[name] = it->second;
    }
  }
  return out;
}

void apply(const Target& t, const Loaded& loaded) {
  ShardedOptimizer& s = t.sharded;
  const OptimizerKind kind = optimizer_kind(s.optimizer(), who_of(s));
  {
    torch::NoGradGuard no_grad;
    for (size_t b = 0; b < s.shard().size(); ++b) {
      at::Tensor chunk = s.shard()[b];  // ZeRO-1/2: a view of the parameters' flat buffer
      chunk.copy_(loaded.chunks[b]);
      set_element_state(s.optimizer(), kind, chunk, loaded.states[b]);
    }
    for (auto& item : t.module.named_parameters(true))
      if (loaded.unsharded.count(item.key())) item.value().copy_(loaded.unsharded.at(item.key()));
    for (auto& item : t.module.named_buffers(true))
      if (loaded.unsharded.count(item.key())) item.value().copy_(loaded.unsharded.at(item.key()));
  }
  // ZeRO-1/2 hold whole parameters: each rank's new chunk to everyone. ZeRO-3
  // gathers its units at the next forward.
  if (t.whole) s.gather_parameters();
}

void load_target(const ShardedCheckpointer& self, int keep_last, std::int64_t step, const Target& t) {
  Loaded loaded;
  std::string error;
  try {
    check_same_model(t);
    loaded = read_shard(self, keep_last, step, t);
  } catch (const std::exception& e) {
    error = who_of(t.sharded) + ": " + e.what();
  }
  agree(t.sharded.comm(), error, t.sharded.who() + " checkpoint: cannot load " + self.folder(step));
  apply(t, loaded);
}

Target target_of(Zero3& zero, torch::nn::Module& module) {
  return {zero.sharded(), module, false, [&zero] { return zero.full_parameters(); }};
}

}  // namespace

ShardedCheckpointer::ShardedCheckpointer(std::string dir, int keep_last)
    : dir_(std::move(dir)), keep_last_(keep_last), files_(dir_, 1, keep_last) {}

std::string ShardedCheckpointer::folder(std::int64_t step) const { return files_.folder(step); }
std::string ShardedCheckpointer::model_file(std::int64_t step) const { return files_.model_file(step, 0); }
std::string ShardedCheckpointer::state_file(std::int64_t step, int writer) const {
  return files_.state_file(step, writer);
}
std::string ShardedCheckpointer::manifest_file(std::int64_t step, int writer) const {
  return files_.manifest_file(step, writer);
}

// From stage 0's manifest, not yet checked: the Checkpointer built with it
// checks the manifest's CRC and its count, so a wrong number is refused there.
int ShardedCheckpointer::writers(std::int64_t step) const {
  const std::string path = manifest_file(step, 0);
  std::ifstream in(path);
  if (!in)
    throw CheckpointError("checkpoint: " + path + " is missing (no checkpoint of step " + std::to_string(step) +
                          ", or rank 0 has not finished writing it)");
  for (std::string line; std::getline(in, line);) {
    int stage = -1, count = 0;
    if (std::sscanf(line.c_str(), "stage %d of %d", &stage, &count) == 2 && stage == 0 && count >= 1) return count;
  }
  throw CheckpointError("checkpoint: " + path + " has no 'stage 0 of N' line (truncated or corrupt)");
}

std::optional<std::int64_t> ShardedCheckpointer::latest_complete(const checkpoint::Report& report) const {
  for (std::int64_t step : files_.steps()) {
    std::string why;
    try {
      why = Checkpointer(dir_, writers(step), keep_last_).problem(step);
    } catch (const CheckpointError& e) {
      why = e.what();
    }
    if (why.empty()) return step;
    if (report) report("checkpoint: skipping " + folder(step) + ": " + why);
  }
  return std::nullopt;
}

std::string ShardedCheckpointer::save(std::int64_t step, Zero1& zero, torch::nn::Module& model) const {
  return save_target(dir_, keep_last_, step, {zero.sharded(), model, true, {}});
}
std::string ShardedCheckpointer::save(std::int64_t step, Zero2& zero, torch::nn::Module& model) const {
  return save_target(dir_, keep_last_, step, {zero.sharded(), model, true, {}});
}
std::string ShardedCheckpointer::save(std::int64_t step, Zero3& zero) const {
  auto model = zero.model();
  return save_target(dir_, keep_last_, step, target_of(zero, *model));
}

void ShardedCheckpointer::load(std::int64_t step, Zero1& zero, torch::nn::Module& model) const {
  load_target(*this, keep_last_, step, {zero.sharded(), model, true, {}});
}
void ShardedCheckpointer::load(std::int64_t step, Zero2& zero, torch::nn::Module& model) const {
  load_target(*this, keep_last_, step, {zero.sharded(), model, true, {}});
}
void ShardedCheckpointer::load(std::int64_t step, Zero3& zero) const {
  auto model = zero.model();
  load_target(*this, keep_last_, step, target_of(zero, *model));
}

}  // namespace distlab::zero
