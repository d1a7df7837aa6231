// HttpServer: the small HTTP endpoint of a dispatcher or worker (`--metrics_port`): Prometheus'
// /metrics, the health probes, the status page. It routes GET and HEAD requests by exact path to
// handlers; anything else is 404 (unknown path), 405 (another method) or 400 (not a request
// line). One request per connection (the answer says Connection: close). Optionally over TLS.
//
// It must answer the kubelet's probes whoever else reaches its port (issue 30: four idle
// connections used to hold all of civetweb's threads, and the liveness probe failed), so one
// thread runs every connection from a poll loop — an idle or slow client holds a connection,
// never the thread — within these limits (HttpServerOptions):
//  * the request head (request line and headers up to the blank line, after the TLS handshake
//    when serving TLS) must arrive within head_timeout and kMaxHttpHeadBytes, else the
//    connection is closed (with 431 when the head is too long);
//  * the client must take the answer within write_timeout, else the connection is closed;
//  * one peer (IP address) holds at most max_connections_per_peer connections and all peers
//    together max_connections: a connection past either limit closes the oldest open
//    connection of that peer (or of all), so idle connections are pushed out by new ones, and
//    a probe — which sends its request at once — gets its answer whoever holds the rest.
//    Connections are accepted at most kMaxAcceptsPerPass at a time, the requests that arrived
//    served in between, so a burst of new connections pushes out older idle ones before it can
//    push out a probe accepted in the same burst;
//  * out of file descriptors while a connection waits, the server closes its oldest connection
//    to make room (none while nothing waits); with no connection of its own left to close, it stops
//    accepting for kAcceptPauseAfterNoFds (the pending connections wait in the backlog) rather
//    than spin on a listener that stays readable.
//
// Handlers run on the server's thread, one at a time, while other threads of the process run:
// they must be quick and thread-safe. The server's thread blocks SIGPIPE for itself (a client
// that hangs up makes a write fail, not the process die).
//
// Thread-safe; destroying the server stops it and closes every connection.
#ifndef GRANARY_OBS_HTTP_SERVER_H_
#define GRANARY_OBS_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

struct ssl_ctx_st;

namespace granary {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// `query`: the part of the URL after '?' (empty without one).
using HttpHandler = std::function<HttpResponse(const std::string& query)>;

// Bytes of a request head (request line and headers) the server reads.
inline constexpr size_t kMaxHttpHeadBytes = 16 * 1024;
// Connections accepted before the server serves what arrived on the others.
inline constexpr int kMaxAcceptsPerPass = 32;
// How long the server stops accepting when out of file descriptors.
inline constexpr absl::Duration kAcceptPauseAfterNoFds = absl::Milliseconds(100);

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: a free one (HttpServer::port())
  // PEM files of the certificate (chain) and key to serve HTTPS with; both empty: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  absl::Duration head_timeout = absl::Seconds(2);
  absl::Duration write_timeout = absl::Seconds(10);
  int max_connections_per_peer = 16;
  int max_connections = 256;
};

class HttpServer {
 public:
  // Listens on options.host:options.port and serves `handlers` (path → handler, e.g.
  // "/metrics"). Errors: Unavailable when the address cannot be bound, naming it;
  // InvalidArgument naming the file when the TLS certificate or key cannot be loaded (or only
  // one is given), or a limit is not positive.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const HttpServerOptions& options, std::map<std::string, HttpHandler> handlers);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Whether it serves HTTPS.
  bool tls() const { return tls_context_ != nullptr; }
  // Connections open now.
  int connections() const { return open_connections_.load(); }

 private:
  struct Connection;

  HttpServer(const HttpServerOptions& options, std::map<std::string, HttpHandler> handlers);
  void Serve();
  // Accepts up to kMaxAcceptsPerPass pending connections, closing the oldest ones past the
  // limits; out of descriptors with none of its own to close, pauses accepting.
  void AcceptSome();
  // Whether a connection waits in the listener's backlog.
  bool ListenerReadable() const;
  // Closes the oldest connection (of `peer`, when not null).
  void CloseOldest(const std::string* peer);
  void Close(Connection& connection);
  // Advances the connection as far as its socket allows; false when it is done (or failed) and
  // must be closed.
  bool Step(Connection& connection);
  // The answer to a complete request head.
  HttpResponse Answer(const std::string& head, bool* head_only) const;

  const HttpServerOptions options_;
  const std::map<std::string, HttpHandler> handlers_;
  int listener_ = -1;
  int wake_read_ = -1;
  int wake_write_ = -1;
  int port_ = 0;
  ssl_ctx_st* tls_context_ = nullptr;
  // Oldest first; Serve() thread only.
  std::list<std::unique_ptr<Connection>> connections_;
  std::map<std::string, int> connections_per_peer_;  // Serve() thread only
  std::atomic<int> open_connections_{0};
  absl::Time accept_paused_until_ = absl::InfinitePast();  // Serve() thread only
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_OBS_HTTP_SERVER_H_
