// Writes the seed corpora of the fuzz targets from the library's own
// writers (a trace, a merge's inputs, a live stream, flight dumps and exit
// records, a profile, checkpoints of both kinds, shape headers, option
// words), so that every seed is a file the library makes:
//
//   build/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
//
// then `scripts/fuzz.sh --merge` minimises each corpus. Seeds already
// there are kept (the findings among them must stay).
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.hpp"
#include "checkpoint/module_state.hpp"
#include "comm/shaped_p2p.hpp"
#include "comm/threads_backend.hpp"
#include "flight/dump_file.hpp"
#include "flight/exit_file.hpp"
#include "fuzz_input.hpp"
#include "planner/profile.hpp"
#include "trace/chrome_json.hpp"
#include "trace/live_stream.hpp"
#include "zero/optimizer_factory.hpp"
#include "zero/sharded_checkpoint.hpp"

using namespace distlab;
namespace fs = std::filesystem;

namespace {

std::string out_dir;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void seed(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(out_dir + "/" + target);
  fuzz::write_bytes(out_dir + "/" + target + "/" + name, bytes);
}

std::string joined(const std::vector<std::string>& files) {
  std::string all;
  for (size_t i = 0; i < files.size(); ++i) all += (i ? std::string(fuzz::kSeparator) : "") + files[i];
  return all;
}

std::vector<trace::Event> some_events(int rank) {
  std::vector<trace::Event> events;
  trace::Event send{rank, trace::kLaneComm, "send", "send", 10, 40, 4096, 1 - rank, trace::flow_id(0, 1, 0, 0), {{"tag", "0"}}};
  trace::Event fwd{rank, "stage 0", "fwd mb 0", "fwd", 0, 9, 0, -1, 0, {{"microbatch", "0"}, {"step", "1"}}};
  trace::Event inner{rank, "stage 0", "caf\xc3\xa9 \"q\"", "fwd", 2, 5, 0, -1, 0, {}};
  events.push_back(fwd);
  events.push_back(inner);
  if (rank == 0) events.push_back(send);
  else events.push_back({rank, trace::kLaneComm, "recv", "recv", 15, 60, 4096, 0, trace::flow_id(0, 1, 0, 0), {}});
  events.push_back(trace::counter_event(rank, "memory", {{"bytes", 1 << 20}, {"peak", 3 << 20}}, 30));
  return events;
}

std::string trace_file(int rank, bool offset) {
  const std::string path = fuzz::scratch_folder("seeds") + "/trace.json";
  trace::ChromeJsonSink sink(path);
  if (offset) sink.write_clock_offset(rank, {-250, 12});
  for (const trace::Event& e : some_events(rank)) sink.write(e);
  sink.close();
  return read_text(path);
}

void trace_seeds() {
  const std::string rank0 = trace_file(0, false), rank1 = trace_file(1, true);
  for (const char* target : {"json_pull", "trace_dom"}) {
    seed(target, "trace_rank0.json", rank0);
    seed(target, "trace_rank1_offset.json", rank1);
  }
  seed("json_pull", "values.json", R"([1,-2,3.5e-3,"\u00e9\ud83d\ude00",true,false,null,{"b":[],"a":{}}])");
  seed("trace_events", "trace_rank0_chunks3", std::string(1, '\x02') + rank0);
  seed("trace_events", "trace_rank1_chunks16", std::string(1, '\x0f') + rank1);
  seed("trace_merge", "two_ranks", joined({rank0, rank1}));
  std::string live = std::string(trace::kLiveHello) + "\n" + trace::clock_offset_json(1, {1000, 5}) + "\n";
  for (const trace::Event& e : some_events(1)) live += trace::event_to_json(e, 0) + "\n";
  seed("live_stream", "hello_offset_events", std::string(1, '\x05') + live);
}

void flight_seeds() {
  const std::string dir = fuzz::scratch_folder("seeds");
  std::vector<std::string> dumps;
  for (int rank = 0; rank < 3; ++rank) {
    flight::Dump d;
    d.rank = rank;
    d.world_size = 4;
    d.pid = 100 + rank;
    d.host = "node0";
    d.reason = "timeout";
    d.dumped_us = 5'000'000;
    d.dumped_unix_us = 1'780'000'000'000'000;
    d.capacity = 8;
    d.recorded = 2;
    d.groups = {{"world", {0, 1, 2, 3}}};
    flight::Entry done{0, "world", rank, "collective", 0, "broadcast", "tree", -1, 0, -1, "float32", {16}, 64,
                       "lesson 14", flight::State::kCompleted, 10, 11, 20, ""};
    flight::Entry waiting{1, "world", rank, "collective", 1, "all_reduce", "ring", -1, -1, -1, "float32", {1024}, 4096,
                          "lesson 14", flight::State::kTimedOut, 30, 31, 4'000'000, "timed out after 4 s"};
    if (rank == 2) waiting.op = "broadcast";  // a mismatch to diagnose
    d.entries = {done, waiting};
    flight::write_dump(d, flight::dump_path(dir, rank));
    dumps.push_back(read_text(flight::dump_path(dir, rank)));
  }
  flight::ExitRecord killed{flight::kExitVersion, 3, 4, 103, "node0", 0, 137, "SIGKILL", false, 1'780'000'000'500'000};
  flight::write_exit(killed, flight::exit_path(dir, 3));
  const std::string exit = read_text(flight::exit_path(dir, 3));
  seed("json_pull", "flight_dump.json", dumps[0]);
  seed("flight_why", "three_dumps_one_exit", std::string(1, '\x08') + joined({dumps[0], dumps[1], dumps[2], exit}));
  seed("flight_why", "one_dump", std::string(1, '\x00') + dumps[0]);
}

void profile_seeds() {
  planner::Profile p;
  p.date = "2026-11-28";
  p.machine = "host";
  p.libtorch = "1.13.0";
  p.cores = 2;
  p.matmul = {{35, 128, 384, "fp32", 2.1e9}, {700, 128, 384, "fp32", 9.5e9}, {35, 128, 384, "bf16", 1.2e9}};
  p.elementwise_bytes_per_second = 4.0e9;
  p.op_seconds = 4e-6;
  p.links = {{"threads", "p2p", 2, {1e-5, 1e-10}}, {"gloo", "all_reduce", 4, {4e-5, 3e-10}},
             {"threads", "p2p", 2, {7e-5, 2e-10}, 8}};
  p.sharing = {{1, 1.0}, {8, 4.1}};
  p.pieces = {{"layer", "fp32", "none", 1, 35, 8e-4, 9e-4}, {"layer", "fp32", "none", 1, 700, 7e-3, 6e-3},
              {"embedding", "fp32", "none", 1, 35, 8e-5, 1.5e-4}, {"decoder", "bf16", "none", 2, 35, 1e-3, 2e-3},
              {"layer", "bf16", "full", 2, 35, 9e-4, 2.2e-3}};
  p.updates = {{"layer", 1, 2e-4}, {"decoder", 2, 4e-4}};
  p.pieces_model = "d 128, ffn 256, 4 heads, vocabulary 6949, 35 tokens a column, dropout 0.2";
  seed("planner_profile", "profile.json", planner::profile_json(p));
  seed("json_pull", "profile.json", planner::profile_json(p));
}

void option_seeds() {
  const std::vector<std::string> words = {"0F0 0SEND_F0 1RECV_F0 1F0 1B0 1SEND_B0 0RECV_B0 0B0 (1F2;2B0)OVERLAP_F_B 0I1 0W1",
                                          "zb-h1", "all_reduce", "halving-doubling", "avg", "bf16", "selective",
                                          "ulysses", "1.5 GiB", "127.0.0.1:29500"};
  for (size_t i = 0; i < words.size(); ++i) seed("options", "word" + std::to_string(i), std::string(1, char(i)) + words[i]);
}

std::string checkpoint_input(const std::string& folder, const std::string& stage) {
  return joined({read_text(folder + "/" + stage + ".manifest"), read_text(folder + "/" + stage + ".model.pt"),
                 read_text(folder + "/" + stage + ".state.pt")});
}

void checkpoint_seeds() {
  const std::string dir = fuzz::scratch_folder("seeds");
  checkpoint::Checkpointer checkpoints(dir, 1, 1);
  torch::nn::Linear module(2, 3);
  checkpoint::CheckpointPart part;
  for (const auto& [name, tensor] : checkpoint::named_state(*module)) part.model[name] = tensor.detach().clone();
  part.tensors["rng/data"] = at::arange(8, at::kByte);
  part.ints = {{"epoch", 2}, {"step", 1}};
  part.reals = {{"scheduler/lr", 4.75}};
  part.texts = {{"note", "seed"}};
  const std::string folder = checkpoints.save(1, 0, part);
  const std::string files = checkpoint_input(folder, "stage0");
  seed("checkpoint", "linear_as_written", std::string(1, '\x00') + files);
  seed("checkpoint", "linear_manifest_made", std::string(1, '\x02') + files);

  const std::string zero_dir = fuzz::scratch_folder("seeds-zero");
  comm::run_thread_ranks(1, [&](comm::Communicator& comm) {
    torch::nn::Sequential model(torch::nn::Linear(3, 4), torch::nn::Linear(4, 2));
    zero::Zero1 zero(comm, *model, zero::adam(torch::optim::AdamOptions(0.01)));
    const std::string written = zero::ShardedCheckpointer(zero_dir, 1).save(1, zero, *model);
    const std::string zero_files = checkpoint_input(written, "stage0");
    seed("sharded_checkpoint", "zero1_as_written", std::string(1, '\x00') + zero_files);
    seed("sharded_checkpoint", "zero1_manifest_made", std::string(1, '\x02') + zero_files);
  });
  // Found by reading: a manifest and a state that claim two billion writers,
  // and no other file (loading built a part for each before it looked).
  checkpoint::CheckpointPart part0 = checkpoint::Checkpointer(zero_dir, 1, 1).load(1, 0);
  part0.ints["zero/writers"] = 2147483647;
  const std::string hostile = fuzz::scratch_folder("seeds-hostile");
  const std::string claimed = checkpoint::Checkpointer(hostile, 2147483647, 1).save(1, 0, part0);
  seed("sharded_checkpoint", "finding-writers-without-files", std::string(1, '\x00') + checkpoint_input(claimed, "stage0"));
}

void shape_header_seeds() {
  for (const auto& t : {at::zeros({2, 3}), at::zeros({5}, at::kByte), at::zeros({1, 1, 1, 1, 1, 1, 1, 1}, at::kLong)}) {
    const at::Tensor h = comm::shape_header(t, at::Device(at::kCPU), "seeds");
    seed("shape_header", "dims" + std::to_string(t.dim()),
         std::string(reinterpret_cast<const char*>(h.data_ptr<int64_t>()), sizeof(int64_t) * h.numel()));
  }
}

// A checked gloo recv's header (three words), then the recv tensor's dtype
// choice (gloo_header_fuzz.cpp's list: 0 is float) and element count.
void gloo_header_seeds() {
  auto bytes_of = [](std::vector<int64_t> words, uint8_t kind, uint8_t numel) {
    std::string out(reinterpret_cast<const char*>(words.data()), sizeof(int64_t) * words.size());
    return out + static_cast<char>(kind) + static_cast<char>(numel);
  };
  const auto f = static_cast<int64_t>(at::kFloat), l = static_cast<int64_t>(at::kLong);
  seed("gloo_header", "fits", bytes_of({16, f, 4}, 0, 4));
  seed("gloo_header", "misfit-count", bytes_of({20, f, 5}, 0, 4));
  seed("gloo_header", "misfit-dtype", bytes_of({32, l, 4}, 0, 4));
  seed("gloo_header", "malformed-bytes", bytes_of({17, f, 4}, 0, 4));
  seed("gloo_header", "malformed-huge", bytes_of({INT64_MAX, f, INT64_MAX / 4 + 1}, 0, 4));
  seed("gloo_header", "malformed-negative-count", bytes_of({-16, f, -4}, 0, 4));
  seed("gloo_header", "malformed-dtype", bytes_of({16, 999, 4}, 0, 4));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (e.g. tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  trace_seeds();
  flight_seeds();
  profile_seeds();
  option_seeds();
  checkpoint_seeds();
  shape_header_seeds();
  gloo_header_seeds();
  std::printf("seeds written under %s\n", out_dir.c_str());
  return 0;
}
