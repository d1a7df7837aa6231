// HttpGet: fetches one page over plain HTTP/1.0 with civetweb's client (mg_download) — how
// tests and `granary status` read a process' /metrics, /readyz or /status.json.
#ifndef GRANARY_OBS_HTTP_GET_H_
#define GRANARY_OBS_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"

namespace granary {

struct HttpGetResult {
  int status = 0;
  std::string body;
};

// GET http://host:port/path. Errors: Unavailable when nothing answers (naming the URL).
absl::StatusOr<HttpGetResult> HttpGet(const std::string& host, int port, const std::string& path);

}  // namespace granary

#endif  // GRANARY_OBS_HTTP_GET_H_
