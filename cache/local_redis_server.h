// LocalRedisServer: a real `redis-server` (Debian's) on 127.0.0.1 for the in-memory cache tier
// of tests, benchmarks and `granary chaos`, without persistence (so a restart loses every value,
// as a Redis node restarted without persistence does). Stopped (SIGKILL) and reaped when
// destroyed.
#ifndef GRANARY_CACHE_LOCAL_REDIS_SERVER_H_
#define GRANARY_CACHE_LOCAL_REDIS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace granary {

class LocalRedisServer {
 public:
  // Starts it on a free port, with `flags` added to its command line; check ok().
  explicit LocalRedisServer(std::vector<std::string> flags = {});
  ~LocalRedisServer();

  bool ok() const { return server_ != nullptr && server_->running(); }
  int port() const { return port_; }
  // "redis://127.0.0.1:PORT".
  std::string url() const;
  // SIGKILLs it and starts it again on the same port, empty. False if it did not come back.
  bool Restart();
  // SIGKILLs it (and reaps it).
  void Kill();

 private:
  bool Start();

  const std::vector<std::string> flags_;
  int port_ = 0;
  std::unique_ptr<Subprocess> server_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_LOCAL_REDIS_SERVER_H_
