// RedisTestServer: a real `redis-server` (Debian's) on 127.0.0.1 for tests of the in-memory
// cache tier, without persistence (so a restart loses every value, as a Redis node restarted
// without persistence does). Stopped (SIGKILL) and reaped when destroyed.
#ifndef GRANARY_TESTING_REDIS_TEST_SERVER_H_
#define GRANARY_TESTING_REDIS_TEST_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace granary::testing {

class RedisTestServer {
 public:
  // Starts it on a free port, with `flags` added to its command line; check ok().
  explicit RedisTestServer(std::vector<std::string> flags = {});
  ~RedisTestServer();

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

}  // namespace granary::testing

#endif  // GRANARY_TESTING_REDIS_TEST_SERVER_H_
