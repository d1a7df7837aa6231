#include "tools/obs_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "obs/process_metrics.h"
#include "tools/server_flags.h"
#include "tools/tls_flags.h"

ABSL_FLAG(int, metrics_port, -1,
          "Serve HTTP on --host at this port: /metrics (Prometheus), /healthz, /readyz, and on "
          "the dispatcher the status page (/) and /status.json. 0 picks a free port (printed); "
          "-1 serves none.");
ABSL_FLAG(bool, metrics_tls, false,
          "Serve --metrics_port over HTTPS with the certificate and key of --tls_cert and "
          "--tls_key (for a port reachable beyond the pod or host; probes then use scheme "
          "HTTPS).");
ABSL_FLAG(std::string, log_format, "text",
          "Log lines as 'text' (level, time, component, worker, job, task, source, message) or "
          "'json' (one object per line, for log shippers).");

namespace granary {

absl::Status InstallLogFormatFromFlags(LogIdentity identity) {
  return InstallStructuredLog(absl::GetFlag(FLAGS_log_format), std::move(identity));
}

absl::StatusOr<std::unique_ptr<HttpServer>> StartOpsServerFromFlags(
    MetricRegistry& registry, const std::atomic<bool>& ready,
    std::map<std::string, HttpHandler> pages) {
  const int port = absl::GetFlag(FLAGS_metrics_port);
  if (port == -1) return nullptr;
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_port ", port, ": expected -1 (none), 0 (any) or a port"));
  }
  AddProcessMetrics(registry);
  pages["/metrics"] = [&registry](const std::string&) {
    return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", registry.RenderText()};
  };
  pages["/healthz"] = [](const std::string&) { return HttpResponse{200, "text/plain", "ok\n"}; };
  pages["/readyz"] = [&ready](const std::string&) {
    return ready.load() ? HttpResponse{200, "text/plain", "ready\n"}
                        : HttpResponse{503, "text/plain", "not ready\n"};
  };
  HttpServerOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = port;
  if (absl::GetFlag(FLAGS_metrics_tls)) {
    options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
    options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
    if (options.tls_cert_file.empty() || options.tls_key_file.empty()) {
      return absl::InvalidArgumentError("--metrics_tls needs --tls_cert and --tls_key");
    }
  }
  return HttpServer::Start(options, std::move(pages));
}

std::string OpsServerLine(const std::string& component, const HttpServer& server) {
  return absl::StrCat("granary ", component, " metrics on ", server.tls() ? "https" : "http", "://",
                      absl::GetFlag(FLAGS_host), ":", server.port());
}

}  // namespace granary
