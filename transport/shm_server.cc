#include "transport/shm_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "transport/shm_protocol.h"

namespace granary {

absl::StatusOr<std::unique_ptr<ShmServer>> ShmServer::Start(const std::string& worker_address) {
  ASSIGN_OR_RETURN(std::string nonce, NewShmNonce());
  const int listener = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (listener < 0) {
    return absl::UnavailableError(
        absl::StrCat("shared-memory transport: socket: ", std::strerror(errno)));
  }
  socklen_t length;
  const sockaddr_un address = ShmSocketAddress(worker_address, nonce, &length);
  if (::bind(listener, reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
      ::listen(listener, 64) != 0) {
    const int error = errno;
    ::close(listener);
    return absl::UnavailableError(absl::StrCat("shared-memory transport: listening on ",
                                               ShmSocketName(worker_address, nonce), ": ",
                                               std::strerror(error)));
  }
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(listener);
    return absl::UnavailableError(
        absl::StrCat("shared-memory transport: pipe: ", std::strerror(error)));
  }
  std::unique_ptr<ShmServer> server(new ShmServer(std::move(nonce), listener, wake[0], wake[1]));
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

ShmServer::ShmServer(std::string nonce, int listener, int wake_read, int wake_write)
    : nonce_(std::move(nonce)),
      listener_(listener),
      wake_read_(wake_read),
      wake_write_(wake_write),
      // Session ids of a restarted worker never match those of the one before.
      session_base_(static_cast<uint64_t>(std::random_device()()) << 32) {}

ShmServer::~ShmServer() {
  const char stop = 0;
  while (::write(wake_write_, &stop, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  std::map<uint64_t, Session> sessions;
  {
    absl::MutexLock lock(&mu_);
    sessions.swap(sessions_);
  }
  for (auto& [id, session] : sessions) ::close(session.socket);
  ::close(listener_);
  ::close(wake_read_);
  ::close(wake_write_);
}

bool ShmServer::Hold(uint64_t session, const BufferRef& image) {
  if (image->segment_fd() < 0) return false;
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return false;
  it->second.holds[image->segment_id()].push_back(image);
  return true;
}

ShmServer::Stats ShmServer::stats() const {
  absl::MutexLock lock(&mu_);
  Stats stats;
  stats.sessions = static_cast<int64_t>(sessions_.size());
  for (const auto& [id, session] : sessions_) {
    for (const auto& [segment, refs] : session.holds) stats.holds += refs.size();
  }
  return stats;
}

void ShmServer::Serve() {
  while (true) {
    std::vector<pollfd> fds = {{wake_read_, POLLIN, 0}, {listener_, POLLIN, 0}};
    std::vector<uint64_t> ids;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, session] : sessions_) {
        fds.push_back({session.socket, POLLIN, 0});
        ids.push_back(id);
      }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) return;  // Stopping.
    if (fds[1].revents & POLLIN) Accept();
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0 || Handle(ids[i - 2])) continue;
      // The client is gone (or broke the protocol): its holds go with its session.
      Session gone;
      {
        absl::MutexLock lock(&mu_);
        auto it = sessions_.find(ids[i - 2]);
        gone = std::move(it->second);
        sessions_.erase(it);
      }
      ::close(gone.socket);
    }
  }
}

void ShmServer::Accept() {
  const int socket = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
  if (socket < 0) return;
  // Segments hold every task's elements: only processes that could read this worker's memory
  // anyway (its user, or root) may map them.
  ucred peer{};
  socklen_t length = sizeof(peer);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 ||
      (peer.uid != ::geteuid() && peer.uid != 0)) {
    LOG(WARNING) << "shared memory: refused process " << peer.pid << " of uid " << peer.uid
                 << " (only uid " << ::geteuid() << " or root may map this worker's segments)";
    ::close(socket);
    return;
  }
  const uint64_t id = session_base_ | next_session_++;
  {
    // Open before the client learns its id: its first request may come at once.
    absl::MutexLock lock(&mu_);
    sessions_[id].socket = socket;
  }
  ShmMessage hello;
  hello.type = ShmMessage::kHello;
  hello.a = id;
  hello.b = static_cast<uint64_t>(::getpid());
  if (!SendShmMessage(socket, hello).ok()) {
    absl::MutexLock lock(&mu_);
    sessions_.erase(id);
    ::close(socket);
  }
}

bool ShmServer::Handle(uint64_t session) {
  int socket;
  {
    absl::MutexLock lock(&mu_);
    socket = sessions_.at(session).socket;
  }
  ShmMessage message;
  int fd;
  if (!ReceiveShmMessage(socket, &message, &fd).ok()) return false;
  if (fd >= 0) {  // Clients send no descriptors.
    ::close(fd);
    return false;
  }
  if (message.type == ShmMessage::kRelease) {
    absl::MutexLock lock(&mu_);
    auto& holds = sessions_.at(session).holds;
    auto it = holds.find(message.a);
    if (it == holds.end() || message.b > it->second.size()) return false;
    it->second.resize(it->second.size() - message.b);
    if (it->second.empty()) holds.erase(it);
    return true;
  }
  if (message.type == ShmMessage::kFetch) {
    BufferRef held;
    {
      absl::MutexLock lock(&mu_);
      const auto& holds = sessions_.at(session).holds;
      auto it = holds.find(message.a);
      if (it != holds.end()) held = it->second.back();
    }
    ShmMessage reply;
    reply.a = message.a;
    if (held == nullptr) {
      reply.type = ShmMessage::kNoSegment;
      return SendShmMessage(socket, reply).ok();
    }
    reply.type = ShmMessage::kSegment;
    reply.b = held->capacity();
    return SendShmMessage(socket, reply, held->segment_fd()).ok();
  }
  return false;  // Not a message a client sends.
}

}  // namespace granary
