#include "obs/http_get.h"

#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "civetweb.h"

namespace granary {

absl::StatusOr<HttpGetResult> HttpGet(const std::string& host, int port, const std::string& path) {
  static std::once_flag init;
  std::call_once(init, [] { mg_init_library(0); });
  char error[256] = {0};
  mg_connection* connection =
      mg_download(host.c_str(), port, 0, error, sizeof(error),
                  "GET %s HTTP/1.0\r\nHost: %s:%d\r\n\r\n", path.c_str(), host.c_str(), port);
  if (connection == nullptr) {
    return absl::UnavailableError(absl::StrCat("GET http://", host, ":", port, path, ": ", error));
  }
  HttpGetResult result;
  result.status = mg_get_response_info(connection)->status_code;
  char buffer[16384];
  for (int n; (n = mg_read(connection, buffer, sizeof(buffer))) > 0;) result.body.append(buffer, n);
  mg_close_connection(connection);
  return result;
}

}  // namespace granary
