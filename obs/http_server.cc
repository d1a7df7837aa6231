#include "obs/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace granary {
namespace {

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

std::string Serialize(const HttpResponse& response, bool head_only) {
  std::string out = absl::StrCat("HTTP/1.1 ", response.status, " ", Reason(response.status),
                                 "\r\nContent-Type: ", response.content_type,
                                 "\r\nContent-Length: ", response.body.size(),
                                 "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n");
  if (!head_only) out += response.body;
  return out;
}

HttpResponse Text(int status, std::string body) {
  return HttpResponse{status, "text/plain; charset=utf-8", std::move(body)};
}

// The IP address of a peer, without its port.
std::string PeerHost(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text,
                sizeof(text));
  } else if (address.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, text,
                sizeof(text));
  }
  return text;
}

std::string OpenSslErrors() {
  std::string errors;
  while (const unsigned long e = ::ERR_get_error()) {
    char text[256];
    ::ERR_error_string_n(e, text, sizeof(text));
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", text);
  }
  return errors.empty() ? "unknown error" : errors;
}

}  // namespace

struct HttpServer::Connection {
  enum class Phase { kHandshake, kHead, kWrite };
  int fd = -1;
  SSL* ssl = nullptr;
  std::string peer;
  Phase phase = Phase::kHead;
  absl::Time deadline;
  short events = POLLIN;  // what the connection waits for
  std::string in;         // the request head read so far
  std::string out;        // the answer
  size_t written = 0;

  // Moves bytes through TLS or the socket: > 0 bytes moved; 0 when the socket would block
  // (`events` then says for what); -1 when the peer closed or the connection failed.
  ssize_t Transfer(char* data, size_t size, bool write) {
    if (ssl != nullptr) {
      const int n = write ? ::SSL_write(ssl, data, static_cast<int>(size))
                          : ::SSL_read(ssl, data, static_cast<int>(size));
      return n > 0 ? n : Blocked(::SSL_get_error(ssl, n));
    }
    ssize_t n;
    do {
      n = write ? ::send(fd, data, size, MSG_NOSIGNAL) : ::recv(fd, data, size, 0);
    } while (n < 0 && errno == EINTR);
    if (n > 0) return n;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      events = write ? POLLOUT : POLLIN;
      return 0;
    }
    return -1;
  }

  // 0 (and `events` set) when a TLS call only waits for the socket; -1 otherwise.
  ssize_t Blocked(int ssl_error) {
    ::ERR_clear_error();
    if (ssl_error == SSL_ERROR_WANT_READ) {
      events = POLLIN;
      return 0;
    }
    if (ssl_error == SSL_ERROR_WANT_WRITE) {
      events = POLLOUT;
      return 0;
    }
    return -1;
  }
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const HttpServerOptions& options, std::map<std::string, HttpHandler> handlers) {
  if (options.max_connections < 1 || options.max_connections_per_peer < 1 ||
      options.head_timeout <= absl::ZeroDuration() ||
      options.write_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "HTTP server: connection limits and timeouts must be positive");
  }
  std::unique_ptr<HttpServer> server(new HttpServer(options, std::move(handlers)));
  const std::string listening = absl::StrCat(options.host, ":", options.port);
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HTTPS on ", listening, " needs both a certificate and a key file (got certificate '",
        options.tls_cert_file, "', key '", options.tls_key_file, "')"));
  }
  if (!options.tls_cert_file.empty()) {
    server->tls_context_ = ::SSL_CTX_new(::TLS_server_method());
    if (server->tls_context_ == nullptr ||
        ::SSL_CTX_set_min_proto_version(server->tls_context_, TLS1_2_VERSION) != 1) {
      return absl::InternalError(absl::StrCat("HTTPS on ", listening, ": ", OpenSslErrors()));
    }
    if (::SSL_CTX_use_certificate_chain_file(server->tls_context_, options.tls_cert_file.c_str()) !=
        1) {
      return absl::InvalidArgumentError(
          absl::StrCat("HTTPS certificate file '", options.tls_cert_file, "': ", OpenSslErrors()));
    }
    if (::SSL_CTX_use_PrivateKey_file(server->tls_context_, options.tls_key_file.c_str(),
                                      SSL_FILETYPE_PEM) != 1 ||
        ::SSL_CTX_check_private_key(server->tls_context_) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("HTTPS key file '", options.tls_key_file, "': ", OpenSslErrors()));
    }
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options.port);
  if (const int e = ::getaddrinfo(options.host.c_str(), port.c_str(), &hints, &found); e != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve HTTP on ", listening, ": ", ::gai_strerror(e)));
  }
  int error = 0;
  for (addrinfo* a = found; a != nullptr && server->listener_ < 0; a = a->ai_next) {
    const int s = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    if (s >= 0 && ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
        ::bind(s, a->ai_addr, a->ai_addrlen) == 0 && ::listen(s, 512) == 0) {
      server->listener_ = s;
    } else {
      error = errno;
      if (s >= 0) ::close(s);
    }
  }
  ::freeaddrinfo(found);
  if (server->listener_ < 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", listening, ": ",
                                               std::strerror(error),
                                               " (address in use or not local?)"));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(server->listener_, reinterpret_cast<sockaddr*>(&bound), &length);
  server->port_ =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(bound).sin6_port
                                        : reinterpret_cast<const sockaddr_in&>(bound).sin_port);
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("HTTP server: pipe: ", std::strerror(errno)));
  }
  server->wake_read_ = wake[0];
  server->wake_write_ = wake[1];
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

HttpServer::HttpServer(const HttpServerOptions& options,
                       std::map<std::string, HttpHandler> handlers)
    : options_(options), handlers_(std::move(handlers)) {}

HttpServer::~HttpServer() {
  if (thread_.joinable()) {
    const char stop = 0;
    while (::write(wake_write_, &stop, 1) < 0 && errno == EINTR) {
    }
    thread_.join();
  }
  while (!connections_.empty()) CloseOldest(nullptr);
  for (int fd : {listener_, wake_read_, wake_write_}) {
    if (fd >= 0) ::close(fd);
  }
  if (tls_context_ != nullptr) ::SSL_CTX_free(tls_context_);
}

void HttpServer::Serve() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  // A write to a hung-up TLS client (OpenSSL writes without MSG_NOSIGNAL) raises SIGPIPE at this
  // thread: blocked, it stays pending here and the write fails with EPIPE.
  ::pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  std::vector<pollfd> fds;
  while (true) {
    const bool accepting = absl::Now() >= accept_paused_until_;
    fds.assign({{wake_read_, POLLIN, 0}, {listener_, static_cast<short>(accepting ? POLLIN : 0), 0}});
    absl::Time next_deadline = accepting ? absl::InfiniteFuture() : accept_paused_until_;
    for (const auto& c : connections_) {
      fds.push_back({c->fd, c->events, 0});
      next_deadline = std::min(next_deadline, c->deadline);
    }
    int timeout_ms = -1;
    if (next_deadline != absl::InfiniteFuture()) {
      timeout_ms = static_cast<int>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(absl::Ceil(next_deadline - absl::Now(), absl::Milliseconds(1))),
          0, 60'000));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) return;  // Stopping.
    size_t i = 2;
    for (auto it = connections_.begin(); it != connections_.end(); ++i) {
      Connection& c = **it;
      const bool keep = (fds[i].revents == 0 || Step(c)) && absl::Now() < c.deadline;
      if (keep) {
        ++it;
        continue;
      }
      Close(c);
      it = connections_.erase(it);
    }
    if ((fds[1].revents & POLLIN) != 0) AcceptSome();
  }
}

void HttpServer::AcceptSome() {
  for (int accepted = 0; accepted < kMaxAcceptsPerPass; ++accepted) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    const int fd = ::accept4(listener_, reinterpret_cast<sockaddr*>(&address), &length,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors: make room from our own connections, oldest first — but only for a
      // connection that is waiting. Linux's accept fails with EMFILE before it looks at the
      // backlog, so at the limit it fails even when nothing is pending (after the last
      // descriptor went to the connection accepted just before), and closing one of ours then
      // would cut off a client for nothing.
      if (errno == EMFILE || errno == ENFILE) {
        if (!ListenerReadable()) return;
        if (!connections_.empty()) {
          CloseOldest(nullptr);
          continue;
        }
        accept_paused_until_ = absl::Now() + kAcceptPauseAfterNoFds;
      }
      return;  // EAGAIN: none left
    }
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    connection->peer = PeerHost(address);
    connection->deadline = absl::Now() + options_.head_timeout;
    if (connections_per_peer_[connection->peer] >= options_.max_connections_per_peer) {
      CloseOldest(&connection->peer);
    }
    if (static_cast<int>(connections_.size()) >= options_.max_connections) CloseOldest(nullptr);
    if (tls_context_ != nullptr) {
      connection->ssl = ::SSL_new(tls_context_);
      if (connection->ssl == nullptr || ::SSL_set_fd(connection->ssl, fd) != 1) {
        ::ERR_clear_error();
        if (connection->ssl != nullptr) ::SSL_free(connection->ssl);
        ::close(fd);
        continue;
      }
      connection->phase = Connection::Phase::kHandshake;
    }
    ++connections_per_peer_[connection->peer];
    ++open_connections_;
    connections_.push_back(std::move(connection));
  }
}

bool HttpServer::ListenerReadable() const {
  pollfd listener{listener_, POLLIN, 0};
  return ::poll(&listener, 1, 0) > 0 && (listener.revents & POLLIN) != 0;
}

void HttpServer::CloseOldest(const std::string* peer) {
  for (auto it = connections_.begin(); it != connections_.end(); ++it) {
    if (peer != nullptr && (*it)->peer != *peer) continue;
    Close(**it);
    connections_.erase(it);
    return;
  }
}

void HttpServer::Close(Connection& connection) {
  if (connection.ssl != nullptr) {
    if (connection.phase == Connection::Phase::kWrite) ::SSL_shutdown(connection.ssl);
    ::SSL_free(connection.ssl);
    ::ERR_clear_error();
  }
  ::close(connection.fd);
  if (--connections_per_peer_[connection.peer] == 0) connections_per_peer_.erase(connection.peer);
  --open_connections_;
}

bool HttpServer::Step(Connection& c) {
  while (true) {
    switch (c.phase) {
      case Connection::Phase::kHandshake: {
        const int accepted = ::SSL_accept(c.ssl);
        if (accepted != 1) return c.Blocked(::SSL_get_error(c.ssl, accepted)) == 0;
        c.phase = Connection::Phase::kHead;
        c.events = POLLIN;
        break;
      }
      case Connection::Phase::kHead: {
        char buffer[4096];
        const ssize_t n = c.Transfer(buffer, sizeof(buffer), /*write=*/false);
        if (n <= 0) return n == 0;
        c.in.append(buffer, static_cast<size_t>(n));
        const size_t end = c.in.find("\r\n\r\n");
        if (end != std::string::npos && end + 4 <= kMaxHttpHeadBytes) {
          bool head_only = false;
          const HttpResponse response = Answer(c.in.substr(0, end), &head_only);
          c.out = Serialize(response, head_only);
        } else if (c.in.size() > kMaxHttpHeadBytes) {
          c.out = Serialize(
              Text(431, absl::StrCat("the request head exceeds ", kMaxHttpHeadBytes, " bytes\n")),
              false);
        } else {
          break;  // Read on.
        }
        c.in.clear();
        c.phase = Connection::Phase::kWrite;
        c.deadline = absl::Now() + options_.write_timeout;
        c.events = POLLOUT;
        break;
      }
      case Connection::Phase::kWrite: {
        const ssize_t n =
            c.Transfer(c.out.data() + c.written, c.out.size() - c.written, /*write=*/true);
        if (n <= 0) return n == 0;
        c.written += static_cast<size_t>(n);
        if (c.written == c.out.size()) return false;  // Answered: close.
        break;
      }
    }
  }
}

HttpResponse HttpServer::Answer(const std::string& head, bool* head_only) const {
  const std::string request_line = head.substr(0, head.find("\r\n"));
  const std::vector<std::string> parts = absl::StrSplit(request_line, ' ');
  if (parts.size() != 3 || parts[1].empty() || parts[1][0] != '/' ||
      !absl::StartsWith(parts[2], "HTTP/")) {
    return Text(400, "expected a request line: METHOD /path HTTP/1.x\n");
  }
  const std::string& method = parts[0];
  *head_only = method == "HEAD";
  if (method != "GET" && method != "HEAD") return Text(405, "only GET and HEAD\n");
  const size_t question = parts[1].find('?');
  const std::string path = parts[1].substr(0, question);
  const std::string query = question == std::string::npos ? "" : parts[1].substr(question + 1);
  const auto it = handlers_.find(path);
  if (it == handlers_.end()) return Text(404, absl::StrCat("no page ", path, "\n"));
  return it->second(query);
}

}  // namespace granary
