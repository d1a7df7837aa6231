// TcpProxy: a TCP proxy on 127.0.0.1 between a process under test and one upstream address, that
// its owner can cut and heal — a network partition of that one link, the other links untouched
// (issue 32's split brain: the leader cut from etcd but not from its workers; `granary chaos`'s
// leader_partition scenario puts one between each dispatcher replica and each etcd member).
//
// Each accepted connection is joined to a new connection to the upstream and bytes are copied
// both ways by the proxy's thread. Cut() closes every joined connection at once (both peers see
// the connection reset or closed) and, until Heal(), accepts new connections only to close them.
// Thread-safe; the destructor closes everything and joins the thread.
#ifndef GRANARY_FAULTINJECT_TCP_PROXY_H_
#define GRANARY_FAULTINJECT_TCP_PROXY_H_

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace granary {

class TcpProxy {
 public:
  // Listens on 127.0.0.1 (a free port) and forwards to `upstream` ("127.0.0.1:PORT").
  // Unavailable when it cannot listen; InvalidArgument for a malformed upstream.
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(const std::string& upstream);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  // "127.0.0.1:PORT": where the process under test connects instead of the upstream.
  std::string address() const;

  void Cut() ABSL_LOCKS_EXCLUDED(mu_);
  void Heal() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  TcpProxy(int listener, int port, int upstream_port, int wake_read, int wake_write);
  void Run();
  // Copies what `from` has to `to`; false when `from` closed or either failed.
  static bool Pump(int from, int to);

  const int listener_;
  const int port_;
  const int upstream_port_;
  // A pipe that wakes the thread from poll (Cut, the destructor).
  const int wake_read_;
  const int wake_write_;

  absl::Mutex mu_;
  bool cut_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Cuts asked for, and how many of them the thread carried out (closing every connection).
  int cuts_asked_ ABSL_GUARDED_BY(mu_) = 0;
  int cuts_done_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_FAULTINJECT_TCP_PROXY_H_
