// For tests of the shared-memory transport: what /dev/shm holds, to check that nothing is ever
// left there (the transport's segments are memfds, which never appear in it); another local
// process squatting a worker's socket name.
#ifndef GRANARY_TRANSPORT_SHM_TEST_UTIL_H_
#define GRANARY_TRANSPORT_SHM_TEST_UTIL_H_

#include <dirent.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "transport/shm_protocol.h"

namespace granary::testing {

// A worker address of its own for each call in this process (`prefix` names the test), so that
// abstract socket names never collide.
inline std::string UniqueWorkerAddress(const std::string& prefix) {
  static std::atomic<int> n{0};
  return absl::StrCat("127.0.0.1:", prefix, "-", ::getpid(), "-", n++);
}

// The names in /dev/shm (empty if there is no such directory).
inline std::set<std::string> DevShmEntries() {
  std::set<std::string> names;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(dir)) names.insert(e->d_name);
    ::closedir(dir);
  }
  return names;
}

// The abstract name (without '@') a process of this host listens under for the worker at
// `worker_address` ("granary-shm:<nonce>:<worker_address>"), read from /proc/net/unix as any
// local user can; empty when there is none.
inline std::string ListeningShmName(const std::string& worker_address) {
  std::ifstream table("/proc/net/unix");
  std::string line;
  while (std::getline(table, line)) {
    const size_t at = line.find("@granary-shm:");
    if (at != std::string::npos && absl::EndsWith(line, ":" + worker_address)) {
      return line.substr(at + 1);
    }
  }
  return "";
}

// A hello giving session `session` and naming process `pid`.
inline ShmMessage Hello(uint64_t session, uint64_t pid) {
  ShmMessage hello;
  hello.type = ShmMessage::kHello;
  hello.a = session;
  hello.b = pid;
  return hello;
}

// Another local process' socket under a worker's name: it binds the abstract name `name`
// (without the leading NUL) and, given `hello`, answers each connection with it; without, it
// accepts and stays silent. Its connections close when it goes.
class ShmSquatter {
 public:
  ShmSquatter(const std::string& name, std::optional<ShmMessage> hello) : hello_(hello) {
    listener_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path + 1, name.data(), name.size());
    const socklen_t length = offsetof(sockaddr_un, sun_path) + 1 + name.size();
    bound_ = ::bind(listener_, reinterpret_cast<const sockaddr*>(&address), length) == 0 &&
             ::listen(listener_, 16) == 0;
    if (bound_) thread_ = std::thread([this] { Accept(); });
  }
  ~ShmSquatter() {
    ::shutdown(listener_, SHUT_RDWR);  // wakes accept()
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
    for (int s : accepted_) ::close(s);
  }
  ShmSquatter(const ShmSquatter&) = delete;
  ShmSquatter& operator=(const ShmSquatter&) = delete;

  bool bound() const { return bound_; }
  // How many connections it has accepted.
  int connections() const { return connections_.load(); }

 private:
  void Accept() {
    while (true) {
      const int s = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (s < 0) return;
      accepted_.push_back(s);
      ++connections_;
      if (hello_.has_value()) (void)SendShmMessage(s, *hello_);
    }
  }

  const std::optional<ShmMessage> hello_;
  int listener_ = -1;
  bool bound_ = false;
  std::vector<int> accepted_;  // Accept() only, then the destructor after joining it
  std::atomic<int> connections_{0};
  std::thread thread_;
};

}  // namespace granary::testing

#endif  // GRANARY_TRANSPORT_SHM_TEST_UTIL_H_
