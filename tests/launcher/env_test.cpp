// Where a process sits in the job, read from the variables torchrun, Slurm
// and Open MPI leave: every field checked, every bad value refused with one
// line that names the variable.
#include <gtest/gtest.h>

#include <cstdlib>

#include "comm/env.hpp"
#include "comm/errors.hpp"

namespace distlab::comm {
namespace {

// All fields in one line, so a mismatch shows every field at once.
std::string show(const WorldInfo& w) {
  return w.source + " rank " + std::to_string(w.rank) + "/" + std::to_string(w.world_size) + " local " +
         std::to_string(w.local_rank) + "/" + std::to_string(w.local_world_size) + " master " + w.master_addr + ":" +
         std::to_string(w.master_port) + " restart " + std::to_string(w.restart_count);
}

// Field order: rank, world_size, local_rank, local_world_size, master_addr,
// master_port, restart_count, source.
TEST(Env, NothingSetIsAWorldOfOne) {
  EXPECT_EQ(show(world_from({})), show(WorldInfo{0, 1, 0, 1, "127.0.0.1", 29500, 0, "none"}));
}

TEST(Env, Torchrun) {
  WorldInfo w = world_from({{"RANK", "5"},
                            {"WORLD_SIZE", "8"},
                            {"LOCAL_RANK", "1"},
                            {"LOCAL_WORLD_SIZE", "4"},
                            {"MASTER_ADDR", "node0.cluster"},
                            {"MASTER_PORT", "29512"},
                            {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_EQ(show(w), show(WorldInfo{5, 8, 1, 4, "node0.cluster", 29512, 2, "torchrun"}));
}

// torchrun's agent hosts the store; the ranks use the keys of their attempt.
TEST(Env, TorchrunAgentStore) {
  WorldInfo w = world_from({{"RANK", "1"},
                            {"WORLD_SIZE", "2"},
                            {"MASTER_PORT", "29600"},
                            {"TORCHELASTIC_RESTART_COUNT", "3"},
                            {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_EQ(show(w), show(WorldInfo{1, 2, 1, 2, "127.0.0.1", 29600, 3, "torchrun"}));
  EXPECT_TRUE(w.agent_store);
  EXPECT_EQ(w.store_prefix, "/worker/attempt_3");
}

TEST(Env, WithoutAgentStoreRankZeroHostsIt) {
  for (const char* value : {"False", ""}) {
    WorldInfo w = world_from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", value}});
    EXPECT_FALSE(w.agent_store) << value;
    EXPECT_EQ(w.store_prefix, "") << value;
  }
  WorldInfo w = world_from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RESTART_COUNT", "1"}});
  EXPECT_FALSE(w.agent_store);
  EXPECT_EQ(w.store_prefix, "");
}

TEST(Env, TorchrunWithoutLocalValuesIsOneNode) {
  WorldInfo w = world_from({{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"RESTART_COUNT", "1"}});
  EXPECT_EQ(show(w), show(WorldInfo{2, 3, 2, 3, "127.0.0.1", 29500, 1, "torchrun"}));
}

TEST(Env, Slurm) {
  // srun -N 3 -n 8: tasks per node 3,3,2; this is the second task on node 2.
  WorldInfo w = world_from({{"SLURM_PROCID", "7"},
                            {"SLURM_NTASKS", "8"},
                            {"SLURM_LOCALID", "1"},
                            {"SLURM_NODEID", "2"},
                            {"SLURM_TASKS_PER_NODE", "3(x2),2"},
                            {"SLURM_LAUNCH_NODE_IPADDR", "10.1.2.3"}});
  EXPECT_EQ(show(w), show(WorldInfo{7, 8, 1, 2, "10.1.2.3", 29500, 0, "slurm"}));
}

TEST(Env, SlurmNtasksPerNodeAndExplicitMaster) {
  WorldInfo w = world_from({{"SLURM_PROCID", "4"},
                            {"SLURM_NTASKS", "8"},
                            {"SLURM_LOCALID", "0"},
                            {"SLURM_NTASKS_PER_NODE", "4"},
                            {"SLURM_TASKS_PER_NODE", "5,3"},  // the explicit per-node count wins
                            {"SLURM_LAUNCH_NODE_IPADDR", "10.1.2.3"},
                            {"MASTER_ADDR", "10.9.9.9"},
                            {"MASTER_PORT", "1234"}});
  EXPECT_EQ(show(w), show(WorldInfo{4, 8, 0, 4, "10.9.9.9", 1234, 0, "slurm"}));
}

TEST(Env, OpenMpi) {
  WorldInfo w = world_from({{"OMPI_COMM_WORLD_RANK", "3"},
                            {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  // All ranks on this node: the master is here.
  EXPECT_EQ(show(w), show(WorldInfo{3, 4, 3, 4, "127.0.0.1", 29500, 0, "openmpi"}));
}

TEST(Env, TorchrunWinsOverSlurmAndOpenMpi) {
  // distlab-run started inside an srun step: its own variables count.
  WorldInfo w = world_from({{"RANK", "1"},
                            {"WORLD_SIZE", "2"},
                            {"SLURM_PROCID", "0"},
                            {"SLURM_NTASKS", "1"},
                            {"OMPI_COMM_WORLD_RANK", "0"},
                            {"OMPI_COMM_WORLD_SIZE", "1"}});
  EXPECT_EQ(w.source, "torchrun");
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(world_from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}}).source, "slurm");
}

TEST(Env, MasterGivenWithoutAnyLauncher) {
  WorldInfo w = world_from({{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "40000"}});
  EXPECT_EQ(show(w), show(WorldInfo{0, 1, 0, 1, "10.0.0.1", 40000, 0, "none"}));
}

TEST(Env, CurrentEnvironmentReadsThisProcess) {
  ::setenv("DISTLAB_ENV_TEST_VALUE", "a=b c", 1);
  Environment env = current_environment();
  ::unsetenv("DISTLAB_ENV_TEST_VALUE");
  ASSERT_EQ(env.count("DISTLAB_ENV_TEST_VALUE"), 1u);
  EXPECT_EQ(env["DISTLAB_ENV_TEST_VALUE"], "a=b c");
  EXPECT_EQ(env["PATH"], std::getenv("PATH"));
}

// A bad environment and the words its message must hold.
struct BadCase {
  const char* what;
  Environment env;
  std::vector<std::string> message_has;
};

std::vector<BadCase> bad_cases() {
  return {
      {"rank equal to world size", {{"RANK", "4"}, {"WORLD_SIZE", "4"}}, {"RANK=4", "WORLD_SIZE=4", "0..3"}},
      {"rank above world size", {{"RANK", "9"}, {"WORLD_SIZE", "4"}}, {"RANK=9", "not below"}},
      {"world size 0", {{"RANK", "0"}, {"WORLD_SIZE", "0"}}, {"WORLD_SIZE=0", "at least one"}},
      {"rank not a number", {{"RANK", "one"}, {"WORLD_SIZE", "2"}}, {"RANK='one'", "not a whole number"}},
      {"negative rank", {{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, {"RANK='-1'", "not a whole number"}},
      {"world size with spaces", {{"RANK", "0"}, {"WORLD_SIZE", " 2"}}, {"WORLD_SIZE=' 2'"}},
      {"world size missing", {{"RANK", "0"}}, {"WORLD_SIZE is missing", "torchrun"}},
      {"rank missing", {{"WORLD_SIZE", "2"}}, {"RANK is missing"}},
      {"local rank too big",
       {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}},
       {"LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2"}},
      {"local world bigger than world",
       {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}},
       {"LOCAL_WORLD_SIZE=3", "WORLD_SIZE=2"}},
      {"port too big", {{"MASTER_PORT", "70000"}}, {"MASTER_PORT='70000'", "1..65535"}},
      {"port 0", {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "0"}}, {"MASTER_PORT='0'"}},
      {"port not a number", {{"MASTER_PORT", "http"}}, {"MASTER_PORT='http'"}},
      {"empty master address", {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", ""}}, {"MASTER_ADDR=''"}},
      {"several nodes without master",
       {{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}},
       {"MASTER_ADDR is missing", "rank 0's node"}},
      {"bad restart count", {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"RESTART_COUNT", "x"}}, {"RESTART_COUNT='x'"}},
      {"agent store neither true nor false",
       {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"TORCHELASTIC_USE_AGENT_STORE", "yes"}},
       {"TORCHELASTIC_USE_AGENT_STORE='yes'", "True"}},
      {"slurm world size 0", {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}}, {"SLURM_NTASKS=0"}},
      {"slurm rank too big", {{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}}, {"SLURM_PROCID=2", "SLURM_NTASKS=2"}},
      {"slurm bad tasks per node",
       {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_TASKS_PER_NODE", "2(x"}},
       {"SLURM_TASKS_PER_NODE"}},
      {"slurm node beyond the list",
       {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_NODEID", "3"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}},
       {"SLURM_NODEID=3"}},
      {"open mpi size missing", {{"OMPI_COMM_WORLD_RANK", "0"}}, {"OMPI_COMM_WORLD_SIZE is missing"}},
      {"open mpi across nodes without master",
       {{"OMPI_COMM_WORLD_RANK", "0"},
        {"OMPI_COMM_WORLD_SIZE", "4"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
       {"MASTER_ADDR is missing"}},
  };
}

TEST(Env, BadValuesGiveOneLineNamingTheVariable) {
  for (const auto& c : bad_cases()) {
    SCOPED_TRACE(c.what);
    std::string message;
    try {
      world_from(c.env);
    } catch (const SetupError& e) {
      message = e.what();
    }
    ASSERT_FALSE(message.empty()) << "accepted";
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    // Every message says what to do about it.
    EXPECT_TRUE(message.find("set ") != std::string::npos || message.find("check ") != std::string::npos) << message;
    for (const auto& part : c.message_has) EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace distlab::comm
