#include "faultinject/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/loopback_port.h"

namespace granary {
namespace {

// Per direction of a connection: bytes read and not yet forwarded beyond this are not read on
// (the sender feels the back-pressure of a slow or stalled direction).
constexpr size_t kMaxPendingBytes = 1 << 20;
constexpr size_t kReadChunk = 64 << 10;

// Nagle off (the proxy forwards small RPC frames as they come), non-blocking.
void PrepareSocket(int s) {
  const int one = 1;
  ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::fcntl(s, F_SETFL, ::fcntl(s, F_GETFL) | O_NONBLOCK);
}

// Closes `s` with an RST instead of a FIN.
void CloseWithReset(int s) {
  const linger abort = {1, 0};
  ::setsockopt(s, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
  ::close(s);
}

std::string Millis(absl::Duration d) { return absl::StrCat(absl::ToInt64Milliseconds(d), " ms"); }

}  // namespace

std::string ProxyToxics::Describe() const {
  std::vector<std::string> parts;
  if (latency > absl::ZeroDuration() || jitter > absl::ZeroDuration()) {
    parts.push_back(absl::StrCat("latency ", Millis(latency), " + jitter 0-", Millis(jitter)));
  }
  if (bytes_per_second > 0) parts.push_back(absl::StrCat(bytes_per_second, " bytes/s"));
  if (half_open) parts.push_back("half-open");
  if (slow_close > absl::ZeroDuration()) parts.push_back("FIN delayed " + Millis(slow_close));
  if (limit_bytes >= 0) parts.push_back(absl::StrCat("closed after ", limit_bytes, " bytes"));
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

// One direction of a joined connection.
struct Flow {
  struct Chunk {
    absl::Time due;
    std::string bytes;
  };
  std::deque<Chunk> pending;
  size_t pending_bytes = 0;
  absl::Time last_due = absl::InfinitePast();
  // Bandwidth: nothing more is sent before this.
  absl::Time next_send = absl::InfinitePast();
  // Bytes forwarded since the toxics of `generation` were set (limit_bytes).
  int64_t forwarded = 0;
  int64_t generation = 0;
  // When the FIN was read (InfiniteFuture: not yet), and whether it was passed on.
  absl::Time fin_read = absl::InfiniteFuture();
  bool fin_sent = false;
};

// A joined connection: `client` accepted, `upstream` dialed (-1 while held by the timeout toxic).
struct TcpProxy::Link {
  int client = -1;
  int upstream = -1;
  Flow flows[kProxyDirections];  // indexed by ProxyDirection
  bool failed = false;
  int from(int d) const { return d == 0 ? client : upstream; }
  int to(int d) const { return d == 0 ? upstream : client; }
  bool done() const { return failed || (flows[0].fin_sent && flows[1].fin_sent); }
  // With an RST each way, or with a FIN each way: what the peers sent and the proxy did not
  // read is read and dropped first (closing a socket with unread bytes would send an RST).
  void Close(bool reset) {
    for (int s : {client, upstream}) {
      if (s < 0) continue;
      if (reset) {
        CloseWithReset(s);
        continue;
      }
      ::shutdown(s, SHUT_WR);
      char drop[4096];
      while (::recv(s, drop, sizeof(drop), MSG_DONTWAIT) > 0) {
      }
      ::close(s);
    }
    client = upstream = -1;
  }
};

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(const std::string& upstream,
                                                          uint64_t seed) {
  const size_t colon = upstream.rfind(':');
  int upstream_port = 0;
  if (colon == std::string::npos || upstream.substr(0, colon) != "127.0.0.1" ||
      !absl::SimpleAtoi(upstream.substr(colon + 1), &upstream_port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TcpProxy upstream '", upstream, "' is not 127.0.0.1:PORT"));
  }
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (listener < 0 ||
      ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener, 64) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (listener >= 0) ::close(listener);
    return absl::UnavailableError(absl::StrCat("TcpProxy: cannot listen: ", std::strerror(errno)));
  }
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) {
    ::close(listener);
    return absl::UnavailableError(absl::StrCat("TcpProxy: pipe: ", std::strerror(errno)));
  }
  std::unique_ptr<TcpProxy> proxy(
      new TcpProxy(listener, ntohs(address.sin_port), upstream_port, wake[0], wake[1], seed));
  proxy->thread_ = std::thread([p = proxy.get()] { p->Run(); });
  return proxy;
}

TcpProxy::TcpProxy(int listener, int port, int upstream_port, int wake_read, int wake_write,
                   uint64_t seed)
    : listener_(listener),
      port_(port),
      upstream_port_(upstream_port),
      wake_read_(wake_read),
      wake_write_(wake_write),
      seed_(seed) {}

TcpProxy::~TcpProxy() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  Wake();
  thread_.join();
  for (int fd : {listener_, wake_read_, wake_write_}) ::close(fd);
}

std::string TcpProxy::address() const { return absl::StrCat("127.0.0.1:", port_); }

void TcpProxy::Wake() {
  const char byte = 0;
  (void)::write(wake_write_, &byte, 1);
}

void TcpProxy::AskAndAwait(int TcpProxy::*asked, int TcpProxy::*done) {
  absl::MutexLock lock(&mu_);
  const int wanted = ++(this->*asked);
  Wake();
  struct Wait {
    TcpProxy* self;
    int TcpProxy::*done;
    int wanted;
  } wait{this, done, wanted};
  mu_.Await(absl::Condition(
      +[](Wait* w)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->self->mu_) { return w->self->*w->done >= w->wanted; },
      &wait));
}

void TcpProxy::Cut() {
  {
    absl::MutexLock lock(&mu_);
    cut_ = true;
  }
  AskAndAwait(&TcpProxy::cuts_asked_, &TcpProxy::cuts_done_);
}

void TcpProxy::Heal() {
  absl::MutexLock lock(&mu_);
  cut_ = false;
}

void TcpProxy::ResetConnections() {
  AskAndAwait(&TcpProxy::resets_asked_, &TcpProxy::resets_done_);
}

void TcpProxy::SetToxics(ProxyDirection direction, const ProxyToxics& toxics) {
  {
    absl::MutexLock lock(&mu_);
    toxics_[static_cast<int>(direction)] = toxics;
    ++toxics_generation_;
  }
  AskAndAwait(&TcpProxy::settings_asked_, &TcpProxy::settings_done_);
}

void TcpProxy::SetTimeout(bool on) {
  {
    absl::MutexLock lock(&mu_);
    timeout_ = on;
  }
  AskAndAwait(&TcpProxy::settings_asked_, &TcpProxy::settings_done_);
}

void TcpProxy::ClearToxics() {
  {
    absl::MutexLock lock(&mu_);
    for (ProxyToxics& toxics : toxics_) toxics = ProxyToxics();
    ++toxics_generation_;
    timeout_ = false;
  }
  AskAndAwait(&TcpProxy::settings_asked_, &TcpProxy::settings_done_);
}

void TcpProxy::Run() {
  std::mt19937_64 jitter_engine(seed_);
  // Joined connections; only this thread touches them.
  std::vector<Link> links;
  for (;;) {
    ProxyToxics toxics[kProxyDirections];
    int64_t generation = 0;
    bool timeout = false;
    bool cut = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      if (cuts_done_ < cuts_asked_ || resets_done_ < resets_asked_) {
        const bool reset = resets_done_ < resets_asked_;
        for (Link& link : links) link.Close(reset);
        links.clear();
        cuts_done_ = cuts_asked_;
        resets_done_ = resets_asked_;
      }
      std::copy(std::begin(toxics_), std::end(toxics_), std::begin(toxics));
      generation = toxics_generation_;
      timeout = timeout_;
      settings_done_ = settings_asked_;
      cut = cut_;
    }
    absl::Time now = absl::Now();
    // Connections held by the timeout toxic are joined once it is off.
    for (Link& link : links) {
      if (timeout || link.upstream >= 0) continue;
      link.upstream = cut ? -1 : ConnectLoopback(upstream_port_);
      if (link.upstream < 0) {
        link.failed = true;
      } else {
        PrepareSocket(link.upstream);
      }
    }
    // What each direction may do now, and when the thread must look again.
    absl::Time next_look = now + absl::Seconds(1);
    std::vector<pollfd> fds = {{wake_read_, POLLIN, 0}, {listener_, POLLIN, 0}};
    for (Link& link : links) {
      short events[2] = {0, 0};  // client, upstream
      for (int d = 0; d < kProxyDirections && !link.failed && !timeout; ++d) {
        Flow& flow = link.flows[d];
        if (flow.generation != generation) {
          flow.generation = generation;
          flow.forwarded = 0;
        }
        if (toxics[d].half_open) continue;
        if (flow.fin_read == absl::InfiniteFuture() && flow.pending_bytes < kMaxPendingBytes) {
          events[d] |= POLLIN;  // the `from` socket of direction d is fds' entry d
        }
        if (!flow.pending.empty()) {
          const absl::Time ready = std::max(flow.pending.front().due, flow.next_send);
          if (ready <= now) {
            events[1 - d] |= POLLOUT;
          } else {
            next_look = std::min(next_look, ready);
          }
        } else if (!flow.fin_sent && flow.fin_read != absl::InfiniteFuture()) {
          next_look = std::min(next_look, flow.fin_read + toxics[d].slow_close);
        }
      }
      fds.push_back({events[0] != 0 ? link.client : -1, events[0], 0});
      fds.push_back({events[1] != 0 ? link.upstream : -1, events[1], 0});
    }
    const int wait_ms = static_cast<int>(std::clamp<int64_t>(
        absl::ToInt64Milliseconds(absl::Ceil(next_look - now, absl::Milliseconds(1))), 0, 1000));
    if (::poll(fds.data(), fds.size(), wait_ms) < 0) continue;
    if (fds[0].revents != 0) {
      char drain[64];
      (void)::read(wake_read_, drain, sizeof(drain));
    }
    now = absl::Now();
    for (size_t i = 0; i < links.size(); ++i) {
      Link& link = links[i];
      for (int d = 0; d < kProxyDirections && !link.failed && !timeout; ++d) {
        Flow& flow = link.flows[d];
        const ProxyToxics& t = toxics[d];
        if (t.half_open) continue;
        // Read what the sender has.
        if (fds[2 + 2 * i + d].revents != 0 && flow.fin_read == absl::InfiniteFuture() &&
            flow.pending_bytes < kMaxPendingBytes) {
          std::string buffer(kReadChunk, '\0');
          const ssize_t n = ::recv(link.from(d), buffer.data(), buffer.size(), MSG_DONTWAIT);
          if (n == 0) {
            flow.fin_read = now;
          } else if (n > 0) {
            buffer.resize(static_cast<size_t>(n));
            absl::Time due = now + t.latency;
            if (t.jitter > absl::ZeroDuration()) {
              due += absl::Microseconds(static_cast<int64_t>(
                  jitter_engine() %
                  static_cast<uint64_t>(absl::ToInt64Microseconds(t.jitter) + 1)));
            }
            flow.last_due = std::max(flow.last_due, due);
            flow.pending_bytes += buffer.size();
            flow.pending.push_back({flow.last_due, std::move(buffer)});
          } else if (errno != EAGAIN && errno != EINTR) {
            link.failed = true;
          }
        }
        // Forward what is due.
        while (!link.failed && !flow.pending.empty() && flow.pending.front().due <= now &&
               flow.next_send <= now) {
          Flow::Chunk& chunk = flow.pending.front();
          size_t amount = chunk.bytes.size();
          if (t.bytes_per_second > 0) {
            amount = std::min<size_t>(amount, std::max<int64_t>(1, t.bytes_per_second / 100));
          }
          if (t.limit_bytes >= 0) {
            if (flow.forwarded >= t.limit_bytes) {
              link.failed = true;  // truncated: closed with a FIN each way below (Close)
              break;
            }
            amount = std::min<size_t>(amount, t.limit_bytes - flow.forwarded);
          }
          const ssize_t w =
              ::send(link.to(d), chunk.bytes.data(), amount, MSG_DONTWAIT | MSG_NOSIGNAL);
          if (w < 0) {
            if (errno != EAGAIN && errno != EINTR) link.failed = true;
            break;
          }
          flow.forwarded += w;
          flow.pending_bytes -= static_cast<size_t>(w);
          chunk.bytes.erase(0, static_cast<size_t>(w));
          if (chunk.bytes.empty()) flow.pending.pop_front();
          if (t.bytes_per_second > 0) {
            flow.next_send = std::max(flow.next_send, now) +
                             absl::Seconds(static_cast<double>(w) / t.bytes_per_second);
          }
        }
        // Pass the FIN on once everything before it went.
        if (!link.failed && flow.pending.empty() && !flow.fin_sent &&
            flow.fin_read + t.slow_close <= now) {
          ::shutdown(link.to(d), SHUT_WR);
          flow.fin_sent = true;
        }
      }
    }
    std::vector<Link> open;
    for (Link& link : links) {
      if (link.done()) {
        link.Close(/*reset=*/false);
      } else {
        open.push_back(std::move(link));
      }
    }
    links = std::move(open);
    // Accepted after the polled links are served: `fds` holds no entry for a new one yet.
    if (fds[1].revents & POLLIN) {
      const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        // Read now, not before the poll: a connection made once Heal() returned goes through.
        bool refuse = false;
        bool hold = false;
        {
          absl::MutexLock lock(&mu_);
          refuse = cut_;
          hold = timeout_;
        }
        Link link;
        link.client = client;
        link.upstream = refuse || hold ? -1 : ConnectLoopback(upstream_port_);
        if (refuse || (!hold && link.upstream < 0)) {
          ::close(client);
        } else {
          PrepareSocket(client);
          if (link.upstream >= 0) PrepareSocket(link.upstream);
          links.push_back(std::move(link));
        }
      }
    }
  }
  for (Link& link : links) link.Close(/*reset=*/false);
}

}  // namespace granary
