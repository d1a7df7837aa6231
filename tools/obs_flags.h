// Flags and plumbing of what a server command shows operators (issue 19), shared by
// `granary dispatcher` and `granary worker`: --metrics_port (the HTTP endpoint: /metrics,
// /healthz, /readyz and the command's own pages) and --log_format (structured logs).
#ifndef GRANARY_TOOLS_OBS_FLAGS_H_
#define GRANARY_TOOLS_OBS_FLAGS_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "obs/http_server.h"
#include "obs/metrics.h"
#include "obs/structured_log.h"

ABSL_DECLARE_FLAG(int, metrics_port);
ABSL_DECLARE_FLAG(bool, metrics_tls);
ABSL_DECLARE_FLAG(std::string, log_format);

namespace granary {

// Routes the process' logs through --log_format for `identity` (obs/structured_log.h).
absl::Status InstallLogFormatFromFlags(LogIdentity identity);

// With --metrics_port >= 0 (0: a free port), serves on --host: GET /metrics (the registry, with
// the process' RSS and CPU added), /healthz (200 while the process serves: liveness), /readyz
// (200 once `ready` is set, else 503: readiness), and `pages`; over HTTPS with --tls_cert and
// --tls_key when --metrics_tls is set (InvalidArgument naming the flags when they are not).
// nullptr (and no error) when --metrics_port is -1. The caller prints OpsServerLine once its gRPC listening line is out.
absl::StatusOr<std::unique_ptr<HttpServer>> StartOpsServerFromFlags(
    MetricRegistry& registry, const std::atomic<bool>& ready,
    std::map<std::string, HttpHandler> pages = {});

// "granary <component> metrics on http[s]://<host>:<port>" (the second stdout line of a server
// started with --metrics_port; tests read the port from it).
std::string OpsServerLine(const std::string& component, const HttpServer& server);

}  // namespace granary

#endif  // GRANARY_TOOLS_OBS_FLAGS_H_
