#include "cache/local_redis_server.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/loopback_port.h"

namespace granary {
namespace {

// A port nothing listens on now. A cluster node also listens on its bus port, PORT + 10000,
// which must exist and be free too.
int FreePort(bool with_cluster_bus) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = BindLoopbackPort(0);
    if (!with_cluster_bus || (port + 10000 < 65536 && BindLoopbackPort(port + 10000) != 0))
      return port;
  }
  return 0;
}

}  // namespace

LocalRedisServer::LocalRedisServer(std::vector<std::string> flags)
    : flags_(std::move(flags)),
      port_(
          FreePort(std::find(flags_.begin(), flags_.end(), "--cluster-enabled") != flags_.end())) {
  Start();
}

LocalRedisServer::~LocalRedisServer() { Kill(); }

std::string LocalRedisServer::url() const { return absl::StrCat("redis://127.0.0.1:", port_); }

bool LocalRedisServer::Start() {
  std::vector<std::string> argv = {
      "/usr/bin/redis-server", "--port", absl::StrCat(port_), "--bind", "127.0.0.1", "--save", "",
      "--appendonly",          "no",     "--loglevel",        "warning"};
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  server_ = std::make_unique<Subprocess>(argv, Subprocess::Stderr::kMergeIntoStdout);
  for (int i = 0; i < 500; ++i) {
    if (!server_->running()) return false;
    if (AcceptsOnLoopback(port_)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void LocalRedisServer::Kill() {
  if (server_ != nullptr && server_->running()) {
    server_->Kill(SIGKILL);
    server_->Wait();
  }
}

bool LocalRedisServer::Restart() {
  Kill();
  return Start();
}

}  // namespace granary
