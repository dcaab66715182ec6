// Which ranks share a host: the same-host transport (comm/shm_links.hpp)
// needs to know, and LOCAL_WORLD_SIZE cannot say (a group's members are not
// the first k ranks; a launcher may place ranks in any order). Each rank
// describes where it runs; ranks whose descriptions agree can share memory.
#pragma once

#include <string>

namespace distlab::comm {

// The host name, the kernel's boot id, and the IPC, mount and pid
// namespaces: two processes that agree on all of them see the same
// /dev/shm, can wake each other through a futex in it, and can name each
// other's pids. Containers or network namespaces with host names of their
// own count as hosts of their own. DISTLAB_HOST_ID, when set, replaces it
// (to keep ranks apart on purpose).
std::string host_identity();

}  // namespace distlab::comm
