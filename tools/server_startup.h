// How a server command (`granary dispatcher`, `granary worker`) starts and stops, the same for
// both: its command line, logs (--log_format), transport security (the TLS flags), the
// operators' HTTP endpoint (--metrics_port, --metrics_tls), its gRPC server on --host:--port, the
// lines it announces on stdout, and a graceful stop on SIGINT or SIGTERM. What the server serves
// (its impl, services and HTTP pages) stays with the command. In order:
//
//   ServerStartup startup("worker", argc, argv);  // first: before any thread exists
//   if (absl::Status s = startup.InstallLogFormat(id); !s.ok()) return startup.Fail(s);
//   if (absl::Status s = startup.Secure(); !s.ok()) return startup.Fail(s);
//   MetricRegistry metrics; ...            // outlives what counts in it
//   auto ops = startup.StartOpsServer(metrics, pages);        // declared after what pages read
//   auto server = startup.Listen({&service}); ...             // declared after the services
//   startup.ServeUntilTerminated(ops->get(), **server);        // returns after the stop
#ifndef GRANARY_TOOLS_SERVER_STARTUP_H_
#define GRANARY_TOOLS_SERVER_STARTUP_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "obs/http_server.h"
#include "obs/metrics.h"
#include "security/transport_security.h"

namespace granary {

class ServerStartup {
 public:
  // For `granary <component>` (argv[0] "granary <component>"): parses the command line
  // (ParseCommandFlags, commands.h: exits on a flag that is not the command's) and blocks SIGINT
  // and SIGTERM in this thread and every thread started afterwards.
  ServerStartup(absl::string_view component, int argc, char** argv);

  ServerStartup(const ServerStartup&) = delete;
  ServerStartup& operator=(const ServerStartup&) = delete;

  // Prints "granary <component>: <message>" to stderr and returns 1, the command's exit code.
  int Fail(const absl::Status& status) const;

  // Routes the process' logs through --log_format, as <component> `instance` (the worker's id;
  // empty for the dispatcher), which the announcement names too. Errors:
  // InstallLogFormatFromFlags's (obs_flags.h).
  absl::Status InstallLogFormat(absl::string_view instance);

  // Reads the TLS flags and makes the gRPC server's credentials from them; prints the plain-text
  // warning for --host (server_flags.h) if there is one. Errors: ServerCredentialsFor's.
  absl::Status Secure();
  // After Secure(): what the TLS flags give.
  const TransportSecurity& security() const { return security_; }

  // StartOpsServerFromFlags (obs_flags.h) over `metrics` and `pages`, reporting ready from
  // ServeUntilTerminated on; errors annotated "--metrics_port". The caller keeps the server
  // (nullptr without --metrics_port), destroyed before what `pages` read and `metrics`.
  absl::StatusOr<std::unique_ptr<HttpServer>> StartOpsServer(
      MetricRegistry& metrics, std::map<std::string, HttpHandler> pages = {});

  // After Secure(): starts a gRPC server of `services` on --host:--port with the credentials,
  // taking requests up to --max_message_bytes and sending replies of any size. The caller keeps
  // it, destroyed before the services. Unavailable "cannot listen on HOST:PORT" when it cannot.
  absl::StatusOr<std::unique_ptr<grpc::Server>> Listen(const std::vector<grpc::Service*>& services);
  // After Listen: "<--host>:<the port bound>".
  std::string address() const;

  // Announces the server on stdout: "granary <component>[ <instance>] listening on <address()>"
  // (the line a supervisor reads, kListeningOn in subprocess.h) and, given an ops server, its
  // OpsServerLine. Then reports ready, waits for SIGINT or SIGTERM, and shuts `server` down,
  // giving its calls a second to finish.
  void ServeUntilTerminated(const HttpServer* ops, grpc::Server& server);

 private:
  const std::string component_;
  std::string instance_;
  TransportSecurity security_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  int port_ = 0;
  // Read by the ops server's /readyz.
  std::atomic<bool> ready_{false};
};

}  // namespace granary

#endif  // GRANARY_TOOLS_SERVER_STARTUP_H_
