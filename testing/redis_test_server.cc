#include "testing/redis_test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

namespace granary::testing {
namespace {

// 127.0.0.1:`port`.
sockaddr_in Loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

// The port bound on 127.0.0.1 when binding `port` (0: any) now succeeds, else 0.
int Bind(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = Loopback(port);
  socklen_t length = sizeof(address);
  int bound = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    bound = ntohs(address.sin_port);
  }
  close(fd);
  return bound;
}

// A port nothing listens on now. A cluster node also listens on its bus port, PORT + 10000,
// which must exist and be free too.
int FreePort(bool with_cluster_bus) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = Bind(0);
    if (!with_cluster_bus || (port + 10000 < 65536 && Bind(port + 10000) != 0)) return port;
  }
  return 0;
}

bool Accepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in address = Loopback(port);
  const bool connected =
      connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return connected;
}

}  // namespace

RedisTestServer::RedisTestServer(std::vector<std::string> flags)
    : flags_(std::move(flags)),
      port_(
          FreePort(std::find(flags_.begin(), flags_.end(), "--cluster-enabled") != flags_.end())) {
  Start();
}

RedisTestServer::~RedisTestServer() { Kill(); }

std::string RedisTestServer::url() const { return absl::StrCat("redis://127.0.0.1:", port_); }

bool RedisTestServer::Start() {
  std::vector<std::string> argv = {
      "/usr/bin/redis-server", "--port", absl::StrCat(port_), "--bind", "127.0.0.1", "--save", "",
      "--appendonly",          "no",     "--loglevel",        "warning"};
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  server_ = std::make_unique<Subprocess>(argv, Subprocess::Stderr::kMergeIntoStdout);
  for (int i = 0; i < 500; ++i) {
    if (!server_->running()) return false;
    if (Accepts(port_)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void RedisTestServer::Kill() {
  if (server_ != nullptr && server_->running()) {
    server_->Kill(SIGKILL);
    server_->Wait();
  }
}

bool RedisTestServer::Restart() {
  Kill();
  return Start();
}

}  // namespace granary::testing
