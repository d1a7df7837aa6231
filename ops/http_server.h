// HttpServer: the small HTTP endpoint of a dispatcher or worker (`--metrics_port`): Prometheus'
// /metrics, the health probes, the status page. Built on civetweb (Debian's libcivetweb), which
// parses HTTP and runs the connections; this class only routes GET requests by exact path to
// handlers. Anything else is 404 (unknown path) or 405 (a method other than GET or HEAD).
// Handlers run on civetweb's threads, several at once: they must be thread-safe.
// Thread-safe; destroying the server stops it and waits for the handlers that run.
#ifndef GRANARY_OPS_HTTP_SERVER_H_
#define GRANARY_OPS_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct mg_context;
struct mg_connection;

namespace granary {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// `query`: the part of the URL after '?' (empty without one).
using HttpHandler = std::function<HttpResponse(const std::string& query)>;

// Civetweb's once-per-process initialization; HttpServer::Start and HttpGet call it.
void InitHttpLibrary();

class HttpServer {
 public:
  // Listens on host:port (port 0: a free one, see port()) and serves `handlers` (path → handler,
  // e.g. "/metrics"). Errors: Unavailable when the address cannot be bound, naming it.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const std::string& host, int port, std::map<std::string, HttpHandler> handlers);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

 private:
  explicit HttpServer(std::map<std::string, HttpHandler> handlers)
      : handlers_(std::move(handlers)) {}
  static int Handle(mg_connection* connection, void* self);

  const std::map<std::string, HttpHandler> handlers_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace granary

#endif  // GRANARY_OPS_HTTP_SERVER_H_
