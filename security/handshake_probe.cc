#include "security/handshake_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace granary {
namespace {

// How often WaitForChannel looks at the channel's state, and so how soon after a failed
// handshake it probes.
constexpr absl::Duration kProbeEvery = absl::Milliseconds(250);
// A probe's bound on each connection and exchange (loopback or a LAN answers far sooner).
constexpr absl::Duration kProbeTimeout = absl::Seconds(1);

// The client connection preface of HTTP/2 (RFC 9113 §3.4) and an empty SETTINGS frame, which a
// gRPC server answers with a SETTINGS frame of its own.
constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr char kEmptySettings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
constexpr unsigned char kSettingsFrameType = 4;
constexpr size_t kFrameHeaderBytes = 9;

std::string HttpPrefaceBytes() {
  return absl::StrCat(absl::string_view(kPreface, sizeof(kPreface) - 1),
                      absl::string_view(kEmptySettings, sizeof(kEmptySettings)));
}

// Whether `header` (the first bytes a server sent) is an HTTP/2 SETTINGS frame's header.
bool IsSettingsFrame(absl::string_view header) {
  return header.size() == kFrameHeaderBytes &&
         static_cast<unsigned char>(header[3]) == kSettingsFrameType;
}

struct HostPort {
  std::string host;
  std::string port;
};

// "host:port", "[v6]:port" or gRPC's "dns:///host:port"; nullopt for anything else.
std::optional<HostPort> SplitAddress(absl::string_view address) {
  absl::ConsumePrefix(&address, "dns:///");
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0 || colon + 1 == address.size()) {
    return std::nullopt;
  }
  absl::string_view host = address.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) return std::nullopt;
  return HostPort{std::string(host), std::string(address.substr(colon + 1))};
}

bool IsIpAddress(const std::string& host) {
  unsigned char buffer[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

// A connected TCP socket, closed when it goes.
class TcpConnection {
 public:
  // A connection to `where` within `timeout`, reads and writes on it bounded by `timeout` too;
  // nullopt when nothing accepts one.
  static std::optional<TcpConnection> Dial(const HostPort& where, absl::Duration timeout) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(where.host.c_str(), where.port.c_str(), &hints, &found) != 0) {
      return std::nullopt;
    }
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
      TcpConnection connection(
          ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
      if (connection.fd_ >= 0 && connection.Connect(a, timeout)) return connection;
    }
    return std::nullopt;
  }

  TcpConnection(TcpConnection&& other) : fd_(other.fd_) { other.fd_ = -1; }
  TcpConnection& operator=(TcpConnection&&) = delete;
  ~TcpConnection() {
    if (fd_ >= 0) ::close(fd_);
  }

  int fd() const { return fd_; }

  // Sends `bytes` in plain text and returns the first `n` bytes of the answer (fewer when the
  // server hangs up or is silent).
  std::string Exchange(absl::string_view bytes, size_t n) {
    if (::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(bytes.size())) {
      return "";
    }
    std::string answer(n, '\0');
    const ssize_t got = ::recv(fd_, answer.data(), n, MSG_WAITALL);
    answer.resize(got > 0 ? static_cast<size_t>(got) : 0);
    return answer;
  }

 private:
  explicit TcpConnection(int fd) : fd_(fd) {}

  bool Connect(const addrinfo* a, absl::Duration timeout) {
    if (::connect(fd_, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) return false;
      pollfd writable{fd_, POLLOUT, 0};
      if (::poll(&writable, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1) {
        return false;
      }
      int error = 0;
      socklen_t length = sizeof(error);
      if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
        return false;
      }
    }
    // Blocking from here on (OpenSSL reads and writes it), each call bounded by `timeout`.
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
    const timeval bound = absl::ToTimeval(timeout);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound));
    return true;
  }

  int fd_;
};

// OpenSSL's reason for the last error of this thread ("" if none), clearing them.
std::string OpenSslReason() {
  const unsigned long error = ERR_peek_last_error();
  ERR_clear_error();
  if (error == 0) return "";
  const char* reason = ERR_reason_error_string(error);
  return reason != nullptr ? reason : absl::StrCat("OpenSSL error ", error);
}

// Blocks SIGPIPE in this thread while it lives — OpenSSL writes with write(2), which raises it
// when the server has hung up — and discards one raised meanwhile.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &previous_);
  }
  ~SigpipeBlocked() {
    if (!sigismember(&previous_, SIGPIPE)) {
      const timespec now{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &now) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_;
  sigset_t previous_;
};

struct SslDeleter {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

// A TLS handshake over `connection` with `where` as gRPC makes it (ALPN h2), then the HTTP/2
// preface over it. With `verify`, the server is verified against security.ca_file and the
// address, and the client's certificate presented when it has one.
HandshakeProbe ProbeTls(TcpConnection& connection, const HostPort& where,
                        const TransportSecurity& security, bool verify) {
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, SslDeleter> ctx(SSL_CTX_new(TLS_client_method()));
  if (ctx == nullptr) return {HandshakeVerdict::kUnrecognized, OpenSslReason()};
  static constexpr unsigned char kAlpnH2[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx.get(), kAlpnH2, sizeof(kAlpnH2));
  if (verify) {
    if (SSL_CTX_load_verify_locations(ctx.get(), security.ca_file.c_str(), nullptr) != 1 ||
        (!security.cert_file.empty() &&
         (SSL_CTX_use_certificate_chain_file(ctx.get(), security.cert_file.c_str()) != 1 ||
          SSL_CTX_use_PrivateKey_file(ctx.get(), security.key_file.c_str(), SSL_FILETYPE_PEM) !=
              1))) {
      return {HandshakeVerdict::kUnrecognized, OpenSslReason()};
    }
  }
  SSL_CTX_set_verify(ctx.get(), verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  std::unique_ptr<SSL, SslDeleter> ssl(SSL_new(ctx.get()));
  if (ssl == nullptr || SSL_set_fd(ssl.get(), connection.fd()) != 1) {
    return {HandshakeVerdict::kUnrecognized, OpenSslReason()};
  }
  const bool ip = IsIpAddress(where.host);
  if (!ip) SSL_set_tlsext_host_name(ssl.get(), where.host.c_str());
  if (verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
    if (ip) {
      X509_VERIFY_PARAM_set1_ip_asc(param, where.host.c_str());
    } else {
      X509_VERIFY_PARAM_set1_host(param, where.host.c_str(), 0);
    }
  }
  if (SSL_connect(ssl.get()) != 1) {
    const long verified = SSL_get_verify_result(ssl.get());
    if (verify && verified != X509_V_OK) {
      ERR_clear_error();
      return {HandshakeVerdict::kServerNotTrusted, X509_verify_cert_error_string(verified)};
    }
    // Before TLS 1.3 a server refuses a client certificate within the handshake.
    const std::string reason = OpenSslReason();
    return {absl::StrContains(reason, "alert") && !security.cert_file.empty()
                ? HandshakeVerdict::kClientCertificateRefused
                : HandshakeVerdict::kUnrecognized,
            reason};
  }
  if (!verify) return {HandshakeVerdict::kAgrees, ""};
  // The server speaks first: its SETTINGS frame once it accepted the handshake, or — when it
  // refused the client's certificate — an alert, which TLS 1.3 sends after the client's side of
  // the handshake is done. A server that waits for the client's preface gets it.
  char header[kFrameHeaderBytes];
  size_t got = 0;
  const auto read_header = [&] {
    while (got < sizeof(header)) {
      const int n = SSL_read(ssl.get(), header + got, static_cast<int>(sizeof(header) - got));
      if (n <= 0) return;
      got += static_cast<size_t>(n);
    }
  };
  read_header();
  if (got == 0 && ERR_peek_last_error() == 0) {
    const std::string preface = HttpPrefaceBytes();
    if (SSL_write(ssl.get(), preface.data(), static_cast<int>(preface.size())) > 0) read_header();
  }
  if (IsSettingsFrame(absl::string_view(header, got))) return {HandshakeVerdict::kAgrees, ""};
  const std::string reason = OpenSslReason();
  return {absl::StrContains(reason, "alert") ? HandshakeVerdict::kClientCertificateRefused
                                             : HandshakeVerdict::kUnrecognized,
          reason};
}

}  // namespace

HandshakeProbe ProbeHandshake(const std::string& address, const TransportSecurity& security,
                              absl::Duration timeout) {
  const std::optional<HostPort> where = SplitAddress(address);
  if (!where.has_value()) return {HandshakeVerdict::kNoAnswer, ""};
  const SigpipeBlocked sigpipe_blocked;
  std::optional<TcpConnection> first = TcpConnection::Dial(*where, timeout);
  if (!first.has_value()) return {HandshakeVerdict::kNoAnswer, ""};
  // Each probe spoils its connection for the other: the second gets a fresh one.
  if (security.insecure) {
    if (ProbeTls(*first, *where, security, /*verify=*/false).verdict == HandshakeVerdict::kAgrees) {
      return {HandshakeVerdict::kServerSpeaksTls, ""};
    }
    std::optional<TcpConnection> second = TcpConnection::Dial(*where, timeout);
    if (!second.has_value()) return {HandshakeVerdict::kNoAnswer, ""};
    return {IsSettingsFrame(second->Exchange(HttpPrefaceBytes(), kFrameHeaderBytes))
                ? HandshakeVerdict::kAgrees
                : HandshakeVerdict::kUnrecognized,
            ""};
  }
  if (IsSettingsFrame(first->Exchange(HttpPrefaceBytes(), kFrameHeaderBytes))) {
    return {HandshakeVerdict::kServerSpeaksPlainText, ""};
  }
  std::optional<TcpConnection> second = TcpConnection::Dial(*where, timeout);
  if (!second.has_value()) return {HandshakeVerdict::kNoAnswer, ""};
  const HandshakeProbe tls = ProbeTls(*second, *where, security, /*verify=*/true);
  if (tls.verdict != HandshakeVerdict::kUnrecognized || security.cert_file.empty()) return tls;
  // A server that refuses a client certificate may hang up without an alert (gRPC's does): if
  // it answers the same handshake without the certificate, the certificate is what it refused.
  TransportSecurity anonymous = security;
  anonymous.cert_file.clear();
  anonymous.key_file.clear();
  std::optional<TcpConnection> third = TcpConnection::Dial(*where, timeout);
  if (third.has_value() &&
      ProbeTls(*third, *where, anonymous, /*verify=*/true).verdict == HandshakeVerdict::kAgrees) {
    return {HandshakeVerdict::kClientCertificateRefused,
            "it hangs up after the handshake with it, and answers one without it"};
  }
  return tls;
}

absl::Status HandshakeMismatchError(absl::string_view role, const std::string& address,
                                    const TransportSecurity& security,
                                    const HandshakeProbe& probe) {
  const SecuritySettingNames& names = security.names;
  const std::string server = absl::StrCat("the ", role, " at ", address);
  switch (probe.verdict) {
    case HandshakeVerdict::kServerSpeaksTls:
      return absl::FailedPreconditionError(
          absl::StrCat(server, " speaks TLS and this client plain text: pass ", names.ca,
                       " (the PEM file of the cluster's CA) with this client's certificate (",
                       names.cert, ", ", names.key, ") or token (SECURITY.md)"));
    case HandshakeVerdict::kServerSpeaksPlainText:
      return absl::FailedPreconditionError(absl::StrCat(
          server, " speaks plain text (it runs with --insecure) and this client TLS: pass ",
          names.insecure, " instead of the TLS files, or run the ", role,
          " with TLS (SECURITY.md)"));
    case HandshakeVerdict::kServerNotTrusted:
      return absl::UnauthenticatedError(absl::StrCat(
          server, " presents a certificate that ", names.ca, " '", security.ca_file,
          "' does not verify for this address (", probe.detail, "): pass the CA of the ", role,
          "'s cluster as ", names.ca, ", and dial an address its certificate names"));
    case HandshakeVerdict::kClientCertificateRefused:
      return absl::UnauthenticatedError(absl::StrCat(
          server, " refused this client's certificate, ", names.cert, " '", security.cert_file,
          "' (", probe.detail, "): pass one issued by the CA of the ", role, "'s cluster"));
    case HandshakeVerdict::kNoAnswer:
    case HandshakeVerdict::kAgrees:
    case HandshakeVerdict::kUnrecognized:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status WaitForChannel(grpc::Channel& channel, absl::string_view role,
                            const std::string& address, const TransportSecurity& security,
                            absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  bool answered = false;  // a probe found something listening: no more probes
  while (true) {
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::UnavailableError(absl::StrCat(role, " ", address, " is not reachable (waited ",
                                                 absl::ToInt64Milliseconds(timeout), " ms)"));
    }
    if (channel.WaitForConnected(absl::ToChronoTime(std::min(deadline, now + kProbeEvery)))) {
      return absl::OkStatus();
    }
    if (answered || channel.GetState(false) != GRPC_CHANNEL_TRANSIENT_FAILURE) continue;
    const HandshakeProbe probe =
        ProbeHandshake(address, security,
                       std::clamp(deadline - absl::Now(), absl::Milliseconds(1), kProbeTimeout));
    if (probe.verdict == HandshakeVerdict::kNoAnswer) continue;
    answered = true;
    if (absl::Status mismatch = HandshakeMismatchError(role, address, security, probe);
        !mismatch.ok()) {
      return mismatch;
    }
  }
}

}  // namespace granary
