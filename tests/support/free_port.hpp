// A TCP port for tests that must name one before a program binds it (two
// launchers meeting as two nodes, MASTER_PORT given by hand). Picked below
// the kernel's ephemeral range (32768 and up), where the outgoing
// connections of the gloo jobs running beside the test take their ports,
// so none of them takes it between this check and the program's bind; free
// when checked. -1 when none of 100 tries is free.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <random>

namespace distlab::test_support {

inline int free_port() {
  std::random_device seed;
  std::mt19937 rng(seed());
  std::uniform_int_distribution<int> pick(20000, 28999);  // 29xxx: the launchers' defaults
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = pick(rng);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (free) return port;
  }
  return -1;
}

}  // namespace distlab::test_support
