// The two network questions the launcher answers before starting anything.
#pragma once

#include <string>

namespace distlab::launcher {

// A TCP port no one listens on now, chosen by the kernel. Free when asked:
// rank 0 binds it a moment later (the usual small race, as with torchrun).
int pick_free_port();

// Throws LaunchError when `host` does not resolve, so a typo in
// --master-addr is one line here instead of a connection timeout in every rank.
void check_host_resolves(const std::string& host);

}  // namespace distlab::launcher
