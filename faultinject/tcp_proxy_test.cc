// TcpProxy between a real loopback client and a real loopback echo server: bytes pass both ways,
// a cut closes the joined connections and refuses new ones, a heal lets new ones through again.
#include "faultinject/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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

// Echoes every byte back on every connection it accepts, until destroyed.
class EchoServer {
 public:
  EchoServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(listener_, 16), 0);
    EXPECT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~EchoServer() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

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

  int listener_ = -1;
  int port_ = 0;
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

}  // namespace
}  // namespace granary
