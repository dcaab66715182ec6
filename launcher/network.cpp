#include "network.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "child_process.hpp"

namespace distlab::launcher {

int pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw LaunchError(std::string("cannot open a socket to pick a port: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  int error = errno;
  ::close(fd);
  if (!ok) throw LaunchError(std::string("cannot pick a free port: ") + std::strerror(error));
  return ntohs(addr.sin_port);
}

void check_host_resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  if (rc != 0)
    throw LaunchError("--master-addr '" + host + "' does not resolve (" + ::gai_strerror(rc) +
                      "); give the host name or IP address of node 0");
}

}  // namespace distlab::launcher
