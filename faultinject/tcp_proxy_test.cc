// TcpProxy between a real loopback client and a real loopback echo server: bytes pass both ways,
// a cut closes the joined connections and refuses new ones, a heal lets new ones through again.
// And each toxic, measured on real sockets: the test holds both ends (the connection to the proxy
// and the one the proxy made to a listener of the test's own).
#include "faultinject/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/loopback_port.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

int PortOf(const std::string& address) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) << address;
  return port;
}

// A listening socket on 127.0.0.1 (a free port), closed when destroyed.
class LoopbackListener {
 public:
  LoopbackListener() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(listener_, 16), 0);
    EXPECT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port_ = ntohs(address.sin_port);
  }
  ~LoopbackListener() { ::close(listener_); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 protected:
  int listener_ = -1;

 private:
  int port_ = 0;
};

// Echoes every byte back on every connection it accepts, until destroyed.
class EchoServer : public LoopbackListener {
 public:
  EchoServer() {
    thread_ = std::thread([this] { Run(); });
  }
  ~EchoServer() {
    stop_ = true;
    thread_.join();
  }

 private:
  void Run() {
    std::vector<int> connections;
    while (!stop_) {
      std::vector<pollfd> fds = {{listener_, POLLIN, 0}};
      for (int c : connections) fds.push_back({c, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        char buffer[4096];
        const ssize_t n = ::recv(fds[i].fd, buffer, sizeof(buffer), 0);
        if (n > 0) ::send(fds[i].fd, buffer, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
      if (fds[0].revents & POLLIN) {
        const int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) connections.push_back(c);
      }
    }
    for (int c : connections) ::close(c);
  }

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Sends `text` on `s` and reads as many bytes back (within 5 s); what came back.
std::string RoundTrip(int s, const std::string& text) {
  if (::send(s, text.data(), text.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(text.size())) {
    return "<send failed>";
  }
  std::string got;
  while (got.size() < text.size()) {
    pollfd fd = {s, POLLIN, 0};
    if (::poll(&fd, 1, 5000) <= 0) return got + "<timeout>";
    char buffer[4096];
    const ssize_t n = ::recv(s, buffer, sizeof(buffer), 0);
    if (n <= 0) return got + "<closed>";
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

// Whether the peer closed `s` (or reset it) within 5 s.
bool ClosedByPeer(int s) {
  pollfd fd = {s, POLLIN, 0};
  if (::poll(&fd, 1, 5000) <= 0) return false;
  char byte;
  return ::recv(s, &byte, 1, 0) <= 0;
}

TEST(TcpProxyTest, ForwardsBothWaysCutsAndHeals) {
  EchoServer echo;
  auto proxy = TcpProxy::Start(echo.address());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  const int port = PortOf((*proxy)->address());

  const int before = ConnectLoopback(port);
  ASSERT_GE(before, 0);
  EXPECT_EQ(RoundTrip(before, "hello through the proxy"), "hello through the proxy");

  (*proxy)->Cut();
  // The joined connection is closed by the time Cut returns.
  EXPECT_TRUE(ClosedByPeer(before));
  ::close(before);
  // New connections are accepted only to be closed.
  const int during = ConnectLoopback(port);
  ASSERT_GE(during, 0);
  EXPECT_TRUE(ClosedByPeer(during));
  ::close(during);

  (*proxy)->Heal();
  const int after = ConnectLoopback(port);
  ASSERT_GE(after, 0);
  EXPECT_EQ(RoundTrip(after, "healed"), "healed");
  ::close(after);
}

TEST(TcpProxyTest, AnUpstreamNotOnLoopbackIsRefusedByName) {
  for (const char* upstream : {"10.0.0.1:80", "127.0.0.1", "127.0.0.1:http"}) {
    auto proxy = TcpProxy::Start(upstream);
    ASSERT_FALSE(proxy.ok()) << upstream;
    EXPECT_EQ(proxy.status().code(), absl::StatusCode::kInvalidArgument) << upstream;
    EXPECT_THAT(proxy.status().message(), HasSubstr(upstream)) << upstream;
  }
}

// A listener of the test's own as the proxy's upstream: the test accepts the proxy's connection
// and holds the upstream end itself.
class Upstream : public LoopbackListener {
 public:
  // The next connection the proxy made, or -1 if none comes within `wait`.
  int Accept(absl::Duration wait = absl::Seconds(5)) {
    pollfd fd = {listener_, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(wait))) <= 0) return -1;
    return ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
  }
};

// A client connected through the proxy to the Upstream, both ends held by the test.
struct Joined {
  int client = -1;
  int upstream = -1;
  ~Joined() {
    for (int s : {client, upstream}) {
      if (s >= 0) ::close(s);
    }
  }
};

void SendAll(int s, const std::string& bytes) {
  ASSERT_EQ(::send(s, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// Reads from `s` until `n` bytes came, the stream ended or failed, or `wait` passed.
struct Received {
  std::string bytes;
  bool ended = false;  // the peer's FIN came
  int error = 0;       // errno of a failed read
};
Received Receive(int s, size_t n, absl::Duration wait) {
  Received got;
  const absl::Time deadline = absl::Now() + wait;
  while (got.bytes.size() < n) {
    const absl::Duration left = deadline - absl::Now();
    pollfd fd = {s, POLLIN, 0};
    if (left <= absl::ZeroDuration() ||
        ::poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) {
      break;
    }
    char buffer[8192];
    const ssize_t r = ::recv(s, buffer, std::min(sizeof(buffer), n - got.bytes.size()), 0);
    if (r == 0) {
      got.ended = true;
      break;
    }
    if (r < 0) {
      got.error = errno;
      break;
    }
    got.bytes.append(buffer, static_cast<size_t>(r));
  }
  return got;
}

// A TcpProxy (jitter seed 7) to an Upstream.
class TcpProxyToxicsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<TcpProxy>> proxy = TcpProxy::Start(upstream_.address(), 7);
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = *std::move(proxy);
  }
  // A new connection through the proxy.
  void Join(Joined& joined) {
    joined.client = ConnectLoopback(PortOf(proxy_->address()));
    ASSERT_GE(joined.client, 0);
    joined.upstream = upstream_.Accept();
    ASSERT_GE(joined.upstream, 0);
  }

  Upstream upstream_;
  std::unique_ptr<TcpProxy> proxy_;
};

TEST_F(TcpProxyToxicsTest, LatencyDelaysEachChunkAtLeastAsSetAndKeepsTheOrder) {
  ProxyToxics toxics;
  toxics.latency = absl::Milliseconds(150);
  toxics.jitter = absl::Milliseconds(100);
  proxy_->SetToxics(ProxyDirection::kToUpstream, toxics);
  Joined joined;
  Join(joined);

  const absl::Time sent = absl::Now();
  SendAll(joined.client, "ping");
  const Received got = Receive(joined.upstream, 4, absl::Seconds(5));
  const absl::Duration took = absl::Now() - sent;
  EXPECT_EQ(got.bytes, "ping");
  EXPECT_GE(took, absl::Milliseconds(150));
  EXPECT_LT(took, absl::Milliseconds(150 + 100 + 500));

  // Chunks sent 3 ms apart draw delays up to 100 ms apart: they still arrive in order.
  std::string all;
  for (int i = 0; i < 60; ++i) {
    const std::string chunk = absl::StrCat("<", i, ">");
    SendAll(joined.client, chunk);
    all += chunk;
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  EXPECT_EQ(Receive(joined.upstream, all.size(), absl::Seconds(5)).bytes, all);

  // The other direction is untouched.
  const absl::Time back = absl::Now();
  SendAll(joined.upstream, "pong");
  EXPECT_EQ(Receive(joined.client, 4, absl::Seconds(5)).bytes, "pong");
  EXPECT_LT(absl::Now() - back, absl::Milliseconds(100));
}

TEST_F(TcpProxyToxicsTest, BandwidthLimitsTheRateWithinAFactorOfTwo) {
  ProxyToxics toxics;
  toxics.bytes_per_second = 40000;
  proxy_->SetToxics(ProxyDirection::kToClient, toxics);
  Joined joined;
  Join(joined);

  const std::string bytes(60000, 'b');  // 1.5 s at 40 000 bytes/s
  const absl::Time start = absl::Now();
  SendAll(joined.upstream, bytes);
  const Received got = Receive(joined.client, bytes.size(), absl::Seconds(10));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(got.bytes.size(), bytes.size());
  EXPECT_GE(took, absl::Milliseconds(750));
  EXPECT_LE(took, absl::Milliseconds(3000));
}

TEST_F(TcpProxyToxicsTest, ResetConnectionsIsSeenAsConnectionResetByBothEnds) {
  Joined joined;
  Join(joined);
  SendAll(joined.client, "x");
  ASSERT_EQ(Receive(joined.upstream, 1, absl::Seconds(5)).bytes, "x");

  proxy_->ResetConnections();
  for (int end : {joined.client, joined.upstream}) {
    const Received got = Receive(end, 1, absl::Seconds(5));
    EXPECT_EQ(got.error, ECONNRESET) << "errno " << got.error << ", ended " << got.ended;
  }
  // New connections go through.
  Joined again;
  Join(again);
  SendAll(again.client, "y");
  EXPECT_EQ(Receive(again.upstream, 1, absl::Seconds(5)).bytes, "y");
}

TEST_F(TcpProxyToxicsTest, HalfOpenStopsOneDirectionSilentlyUntilLifted) {
  Joined joined;
  Join(joined);
  ProxyToxics toxics;
  toxics.half_open = true;
  proxy_->SetToxics(ProxyDirection::kToUpstream, toxics);

  SendAll(joined.client, "held");
  ::shutdown(joined.client, SHUT_WR);  // even the FIN is held
  const Received nothing = Receive(joined.upstream, 4, absl::Milliseconds(400));
  EXPECT_EQ(nothing.bytes, "");
  EXPECT_FALSE(nothing.ended);
  EXPECT_EQ(nothing.error, 0);
  // The other direction still flows, and nobody was told.
  SendAll(joined.upstream, "back");
  EXPECT_EQ(Receive(joined.client, 4, absl::Seconds(5)).bytes, "back");

  proxy_->ClearToxics();
  const Received got = Receive(joined.upstream, 5, absl::Seconds(5));
  EXPECT_EQ(got.bytes, "held");
  EXPECT_TRUE(got.ended);
}

TEST_F(TcpProxyToxicsTest, SlowCloseDelaysTheFinButNotTheBytes) {
  ProxyToxics toxics;
  toxics.slow_close = absl::Milliseconds(500);
  proxy_->SetToxics(ProxyDirection::kToUpstream, toxics);
  Joined joined;
  Join(joined);

  const absl::Time start = absl::Now();
  SendAll(joined.client, "last words");
  ::shutdown(joined.client, SHUT_WR);
  EXPECT_EQ(Receive(joined.upstream, 10, absl::Seconds(5)).bytes, "last words");
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(300));
  const Received end = Receive(joined.upstream, 1, absl::Seconds(5));
  EXPECT_TRUE(end.ended);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(500));
}

TEST_F(TcpProxyToxicsTest, LimitBytesTruncatesTheStreamAtExactlyThatManyBytes) {
  Joined joined;
  Join(joined);
  SendAll(joined.upstream, "before the toxic ");  // counted from when the toxic is set
  ASSERT_EQ(Receive(joined.client, 17, absl::Seconds(5)).bytes, "before the toxic ");
  ProxyToxics toxics;
  toxics.limit_bytes = 1000;
  proxy_->SetToxics(ProxyDirection::kToClient, toxics);

  std::string message;
  for (int i = 0; message.size() < 3000; ++i) absl::StrAppend(&message, i, ",");
  SendAll(joined.upstream, message);
  const Received got = Receive(joined.client, message.size(), absl::Seconds(5));
  EXPECT_EQ(got.bytes, message.substr(0, 1000));
  EXPECT_TRUE(got.ended) << "errno " << got.error;
  // The upstream end is closed too.
  EXPECT_TRUE(ClosedByPeer(joined.upstream));
}

TEST_F(TcpProxyToxicsTest, TimeoutAcceptsButForwardsNothingUntilLifted) {
  Joined open;
  Join(open);
  proxy_->SetTimeout(true);

  Joined held;
  held.client = ConnectLoopback(PortOf(proxy_->address()));
  ASSERT_GE(held.client, 0);
  SendAll(held.client, "new");
  SendAll(open.client, "old");
  EXPECT_EQ(upstream_.Accept(absl::Milliseconds(400)), -1);
  EXPECT_EQ(Receive(open.upstream, 3, absl::Milliseconds(100)).bytes, "");
  const Received silent = Receive(held.client, 1, absl::Milliseconds(100));
  EXPECT_FALSE(silent.ended);
  EXPECT_EQ(silent.error, 0);

  proxy_->SetTimeout(false);
  held.upstream = upstream_.Accept();
  ASSERT_GE(held.upstream, 0);
  EXPECT_EQ(Receive(held.upstream, 3, absl::Seconds(5)).bytes, "new");
  EXPECT_EQ(Receive(open.upstream, 3, absl::Seconds(5)).bytes, "old");
}

TEST_F(TcpProxyToxicsTest, DescribeNamesEveryToxic) {
  EXPECT_EQ(ProxyToxics().Describe(), "none");
  ProxyToxics toxics;
  toxics.latency = absl::Milliseconds(50);
  toxics.jitter = absl::Milliseconds(20);
  toxics.bytes_per_second = 10000;
  toxics.half_open = true;
  toxics.slow_close = absl::Milliseconds(300);
  toxics.limit_bytes = 64;
  EXPECT_EQ(toxics.Describe(),
            "latency 50 ms + jitter 0-20 ms, 10000 bytes/s, half-open, FIN delayed 300 ms, "
            "closed after 64 bytes");
}

}  // namespace
}  // namespace granary
