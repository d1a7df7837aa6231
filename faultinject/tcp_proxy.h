// TcpProxy: a TCP proxy on 127.0.0.1 between a process under test and one upstream address, that
// its owner can cut and heal — a network partition of that one link, the other links untouched
// (issue 32's split brain: the leader cut from etcd but not from its workers; `granary chaos`'s
// leader_partition scenario puts one between each dispatcher replica and each etcd member) — and
// whose bytes it can delay, slow, stall, truncate or reset (issue 33, in the spirit of
// Toxiproxy's "toxics"; this kernel has no netem, and none of this needs root).
//
// Each accepted connection is joined to a new connection to the upstream and bytes are copied
// both ways by the proxy's thread, each direction on its own: an end that shuts down writing
// (a FIN) is passed on as a FIN once the bytes before it are forwarded, and the connection is
// closed once both directions ended or either socket failed. Cut() closes every joined
// connection at once (both peers see the connection closed) and, until Heal(), accepts new
// connections only to close them.
//
// The toxics of a direction (SetToxics) apply to every connection, those open and those to come,
// until replaced. The bytes of one direction of one connection are always forwarded in the order
// they were sent — TCP cannot reorder within a connection, so neither does the proxy: a chunk
// that drew a shorter delay than the chunk before it waits for that one. Loss and duplication
// are not faults a TCP proxy can make either (the kernel retransmits); their visible effects on
// a stream — silence, a stall, a reset — are half_open, the timeout toxic and ResetConnections.
//
// Thread-safe; the destructor closes everything and joins the thread.
#ifndef GRANARY_FAULTINJECT_TCP_PROXY_H_
#define GRANARY_FAULTINJECT_TCP_PROXY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace granary {

// Which way bytes flow through a TcpProxy.
enum class ProxyDirection {
  kToUpstream,  // from the connecting process to the upstream
  kToClient,    // from the upstream back to the connecting process
};
inline constexpr int kProxyDirections = 2;

// The faults on the bytes of one direction. The default: none (bytes pass at once).
struct ProxyToxics {
  // Each chunk read is forwarded `latency` + a uniform draw in [0, `jitter`] (seeded by the
  // proxy's seed) after it was read, and never before the chunk read before it.
  absl::Duration latency = absl::ZeroDuration();
  absl::Duration jitter = absl::ZeroDuration();
  // > 0: at most this many bytes are forwarded per second (in bursts of at most 10 ms' worth).
  int64_t bytes_per_second = 0;
  // Forward nothing, FIN included, and read nothing more (the bytes wait in the kernel's buffers
  // until the sender blocks); the sockets stay open and neither peer is told. Lifting it resumes
  // the stream where it stopped.
  bool half_open = false;
  // The FIN of this direction is passed on this long after the proxy read it (and after the
  // bytes before it).
  absl::Duration slow_close = absl::ZeroDuration();
  // >= 0: a connection that has forwarded this many bytes in this direction since these toxics
  // were set and has more to forward is closed (both ways, a FIN each): the receiver gets exactly
  // `limit_bytes` bytes, then the end of the stream — a message cut in the middle.
  int64_t limit_bytes = -1;

  // E.g. "latency 50 ms + jitter 0-20 ms, 10000 bytes/s" ("none" for the default).
  std::string Describe() const;
};

class TcpProxy {
 public:
  // Listens on 127.0.0.1 (a free port) and forwards to `upstream` ("127.0.0.1:PORT"); `seed`
  // seeds the jitter draws. Unavailable when it cannot listen; InvalidArgument for a malformed
  // upstream.
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(const std::string& upstream,
                                                         uint64_t seed = 0);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  // "127.0.0.1:PORT": where the process under test connects instead of the upstream.
  std::string address() const;

  void Cut() ABSL_LOCKS_EXCLUDED(mu_);
  void Heal() ABSL_LOCKS_EXCLUDED(mu_);

  // SetToxics, SetTimeout and ClearToxics return once the proxy's thread applies them: every
  // byte it reads or forwards after that is under the new toxics.
  //
  // Replaces the toxics of `direction` (on open connections and new ones).
  void SetToxics(ProxyDirection direction, const ProxyToxics& toxics) ABSL_LOCKS_EXCLUDED(mu_);
  // The timeout toxic: while on, connections are accepted but not joined to the upstream, and
  // nothing is forwarded on any connection either way (open ones stall, nobody is told). Turned
  // off, the held connections are joined to the upstream (or closed if it does not answer) and
  // every stream resumes where it stopped.
  void SetTimeout(bool on) ABSL_LOCKS_EXCLUDED(mu_);
  // Every toxic off, both directions, and the timeout off.
  void ClearToxics() ABSL_LOCKS_EXCLUDED(mu_);
  // Resets every open connection (both ends see ECONNRESET: closed with SO_LINGER 0); returns
  // once they are. New connections are accepted as before.
  void ResetConnections() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Link;
  TcpProxy(int listener, int port, int upstream_port, int wake_read, int wake_write, uint64_t seed);
  void Run();
  void Wake();
  // Counts one more request in `asked`, wakes the thread and waits until `done` reaches it.
  void AskAndAwait(int TcpProxy::*asked, int TcpProxy::*done) ABSL_LOCKS_EXCLUDED(mu_);

  const int listener_;
  const int port_;
  const int upstream_port_;
  // A pipe that wakes the thread from poll (Cut, the toxics, the destructor).
  const int wake_read_;
  const int wake_write_;
  const uint64_t seed_;

  absl::Mutex mu_;
  bool cut_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool timeout_ ABSL_GUARDED_BY(mu_) = false;
  ProxyToxics toxics_[kProxyDirections] ABSL_GUARDED_BY(mu_);
  // Bumped by every SetToxics/ClearToxics: limit_bytes counts from there.
  int64_t toxics_generation_ ABSL_GUARDED_BY(mu_) = 0;
  // Cuts and resets asked for, and how many of them the thread carried out (closing every
  // connection).
  int cuts_asked_ ABSL_GUARDED_BY(mu_) = 0;
  int cuts_done_ ABSL_GUARDED_BY(mu_) = 0;
  int resets_asked_ ABSL_GUARDED_BY(mu_) = 0;
  int resets_done_ ABSL_GUARDED_BY(mu_) = 0;
  // Changes of the toxics or the timeout asked for, and how many of them the thread applies.
  int settings_asked_ ABSL_GUARDED_BY(mu_) = 0;
  int settings_done_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_FAULTINJECT_TCP_PROXY_H_
