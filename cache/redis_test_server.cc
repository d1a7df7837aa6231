#include "cache/redis_test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

namespace granary::testing {
namespace {

// A port nothing listens on now (bound to 0 and released).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

bool Accepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return connected;
}

}  // namespace

RedisTestServer::RedisTestServer() : port_(FreePort()) { Start(); }

RedisTestServer::~RedisTestServer() {
  if (server_ != nullptr && server_->running()) {
    server_->Kill(SIGKILL);
    server_->Wait();
  }
}

std::string RedisTestServer::url() const { return absl::StrCat("redis://127.0.0.1:", port_); }

bool RedisTestServer::Start() {
  server_ = std::make_unique<Subprocess>(
      std::vector<std::string>{"/usr/bin/redis-server", "--port", absl::StrCat(port_), "--bind",
                               "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel",
                               "warning"},
      Subprocess::Stderr::kMergeIntoStdout);
  for (int i = 0; i < 500; ++i) {
    if (!server_->running()) return false;
    if (Accepts(port_)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool RedisTestServer::Restart() {
  server_->Kill(SIGKILL);
  server_->Wait();
  return Start();
}

}  // namespace granary::testing
