#include "ops/http_server.h"

#include <cstring>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "civetweb.h"

namespace granary {
namespace {

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

void Send(mg_connection* connection, const HttpResponse& response, bool head) {
  const std::string header = absl::StrCat(
      "HTTP/1.1 ", response.status, " ", Reason(response.status),
      "\r\nContent-Type: ", response.content_type, "\r\nContent-Length: ", response.body.size(),
      "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n");
  mg_write(connection, header.data(), header.size());
  if (!head) mg_write(connection, response.body.data(), response.body.size());
}

}  // namespace

void InitHttpLibrary() {
  static std::once_flag init;
  std::call_once(init, [] { mg_init_library(0); });
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& host, int port, std::map<std::string, HttpHandler> handlers) {
  InitHttpLibrary();
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(handlers)));
  const std::string listening = absl::StrCat(host, ":", port);
  const char* options[] = {
      "listening_ports",    listening.c_str(), "num_threads", "4", "enable_keep_alive", "no",
      "request_timeout_ms", "10000",           nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  // Civetweb's own messages (a port in use) go to the error we return, not to stderr.
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  server->context_ = mg_start(&callbacks, server.get(), options);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve HTTP on ", listening, " (address in use or not local?)"));
  }
  mg_set_request_handler(server->context_, "/", &HttpServer::Handle, server.get());
  mg_server_port ports[1];
  if (mg_get_server_ports(server->context_, 1, ports) < 1) {
    return absl::InternalError(absl::StrCat("HTTP server on ", listening, " has no port"));
  }
  server->port_ = ports[0].port;
  return server;
}

HttpServer::~HttpServer() {
  if (context_ != nullptr) mg_stop(context_);
}

int HttpServer::Handle(mg_connection* connection, void* self) {
  const HttpServer& server = *static_cast<HttpServer*>(self);
  const mg_request_info* request = mg_get_request_info(connection);
  const std::string method = request->request_method ? request->request_method : "";
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    Send(connection, {405, "text/plain; charset=utf-8", "only GET and HEAD\n"}, head);
    return 405;
  }
  const std::string path = request->local_uri ? request->local_uri : "";
  const auto it = server.handlers_.find(path);
  if (it == server.handlers_.end()) {
    Send(connection, {404, "text/plain; charset=utf-8", absl::StrCat("no page ", path, "\n")},
         head);
    return 404;
  }
  const HttpResponse response = it->second(request->query_string ? request->query_string : "");
  Send(connection, response, head);
  return response.status;
}

}  // namespace granary
