// Where this process sits in the job, read from the environment the way a
// launcher leaves it. No LibTorch here.
//
// Sources, first match wins:
//   torchrun / distlab-run  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
//                           MASTER_ADDR, MASTER_PORT, (TORCHELASTIC_)RESTART_COUNT,
//                           TORCHELASTIC_USE_AGENT_STORE (torchrun only)
//   Slurm (srun)            SLURM_PROCID, SLURM_NTASKS (or SLURM_STEP_NUM_TASKS,
//                           SLURM_NPROCS), SLURM_LOCALID, SLURM_NTASKS_PER_NODE /
//                           SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE
//                           (Slurm's "2(x3),1" form, read at SLURM_NODEID),
//                           SLURM_LAUNCH_NODE_IPADDR (or MASTER_ADDR),
//                           RESTART_COUNT or SLURM_RESTART_COUNT
//   Open MPI (mpirun)       OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//                           OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE
//                           (MASTER_ADDR, or 127.0.0.1 when all ranks are local)
// A source is recognised by RANK or WORLD_SIZE, SLURM_PROCID, OMPI_COMM_WORLD_*.
// Local values it leaves out mean "every rank on this node". Without
// MASTER_ADDR the address is 127.0.0.1 when all ranks are local, and a
// SetupError when they span nodes. MASTER_ADDR / MASTER_PORT given explicitly
// override every source's guess; the port defaults to 29500.
//
// Who hosts the rendezvous store: rank 0 (distlab-run, srun, mpirun), unless
// TORCHELASTIC_USE_AGENT_STORE=True. PyTorch's torchrun (static rendezvous,
// its default) hosts the store itself in its agent at MASTER_ADDR:MASTER_PORT
// and keeps it across restarts; every rank then connects as a client and
// keeps its keys under "/worker/attempt_<restart count>", as PyTorch's own
// workers do (torch/distributed/rendezvous.py, _create_c10d_store), so an
// attempt never reads the keys of the one before it.
#pragma once

#include <map>
#include <string>

namespace distlab::comm {

struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int restart_count = 0;
  std::string source = "none";  // "torchrun", "slurm", "openmpi" or "none"
  bool agent_store = false;     // the launcher hosts the store; no rank does
  std::string store_prefix;     // "/worker/attempt_<restart_count>" with agent_store, else empty
};

using Environment = std::map<std::string, std::string>;

// The variables of this process.
Environment current_environment();

// Reads `env`. With none of the variables above: a world of one (source
// "none"). Throws SetupError with one line naming the variable and the fix
// for a missing, non-numeric or inconsistent value: rank >= world size,
// world size 0, local rank >= local world size, a port out of range,
// TORCHELASTIC_USE_AGENT_STORE other than True/False.
WorldInfo world_from(const Environment& env);
inline WorldInfo world_from_env() { return world_from(current_environment()); }

}  // namespace distlab::comm
