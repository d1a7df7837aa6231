#include "faultinject/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/loopback_port.h"

namespace granary {
namespace {

// ConnectLoopback, with Nagle off (the proxy forwards small RPC frames as they come).
int ConnectNoDelay(int port) {
  const int s = ConnectLoopback(port);
  if (s < 0) return -1;
  const int one = 1;
  ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(const std::string& upstream) {
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
      new TcpProxy(listener, ntohs(address.sin_port), upstream_port, wake[0], wake[1]));
  proxy->thread_ = std::thread([p = proxy.get()] { p->Run(); });
  return proxy;
}

TcpProxy::TcpProxy(int listener, int port, int upstream_port, int wake_read, int wake_write)
    : listener_(listener),
      port_(port),
      upstream_port_(upstream_port),
      wake_read_(wake_read),
      wake_write_(wake_write) {}

TcpProxy::~TcpProxy() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  const char byte = 0;
  (void)::write(wake_write_, &byte, 1);
  thread_.join();
  for (int fd : {listener_, wake_read_, wake_write_}) ::close(fd);
}

std::string TcpProxy::address() const { return absl::StrCat("127.0.0.1:", port_); }

void TcpProxy::Cut() {
  absl::MutexLock lock(&mu_);
  cut_ = true;
  const int asked = ++cuts_asked_;
  const char byte = 0;
  (void)::write(wake_write_, &byte, 1);
  struct Done {
    const TcpProxy* self;
    int asked;
  } done{this, asked};
  mu_.Await(absl::Condition(
      +[](Done* d)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->self->mu_) { return d->self->cuts_done_ >= d->asked; },
      &done));
}

void TcpProxy::Heal() {
  absl::MutexLock lock(&mu_);
  cut_ = false;
}

bool TcpProxy::Pump(int from, int to) {
  char buffer[64 << 10];
  const ssize_t n = ::recv(from, buffer, sizeof(buffer), MSG_DONTWAIT);
  if (n == 0) return false;
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  for (ssize_t sent = 0; sent < n;) {
    const ssize_t w = ::send(to, buffer + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    sent += w;
  }
  return true;
}

void TcpProxy::Run() {
  // Joined connections (from the client, to the upstream); only this thread touches them.
  std::vector<std::pair<int, int>> pairs;
  const auto close_pair = [](const std::pair<int, int>& pair) {
    ::close(pair.first);
    ::close(pair.second);
  };
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      if (cuts_done_ < cuts_asked_) {
        for (const auto& pair : pairs) close_pair(pair);
        pairs.clear();
        cuts_done_ = cuts_asked_;
      }
    }
    std::vector<pollfd> fds = {{wake_read_, POLLIN, 0}, {listener_, POLLIN, 0}};
    for (const auto& [client, upstream] : pairs) {
      fds.push_back({client, POLLIN, 0});
      fds.push_back({upstream, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 1000) <= 0) continue;
    if (fds[0].revents != 0) {
      char drain[64];
      (void)::read(wake_read_, drain, sizeof(drain));
    }
    std::vector<std::pair<int, int>> open;
    for (size_t i = 0; i < pairs.size(); ++i) {
      const pollfd& client = fds[2 + 2 * i];
      const pollfd& upstream = fds[3 + 2 * i];
      bool alive = true;
      if (client.revents != 0) alive = Pump(pairs[i].first, pairs[i].second);
      if (alive && upstream.revents != 0) alive = Pump(pairs[i].second, pairs[i].first);
      if (alive) {
        open.push_back(pairs[i]);
      } else {
        close_pair(pairs[i]);
      }
    }
    pairs = std::move(open);
    // Accepted after the polled pairs are pumped: `fds` holds no entry for a new one yet.
    if (fds[1].revents & POLLIN) {
      const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        // Read now, not before the poll: a connection made once Heal() returned goes through.
        bool cut = false;
        {
          absl::MutexLock lock(&mu_);
          cut = cut_;
        }
        const int upstream = cut ? -1 : ConnectNoDelay(upstream_port_);
        if (upstream < 0) {
          ::close(client);
        } else {
          const int one = 1;
          ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          pairs.emplace_back(client, upstream);
        }
      }
    }
  }
  for (const auto& pair : pairs) close_pair(pair);
}

}  // namespace granary
