#include "tools/server_startup.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "glog/logging.h"
#include "grpcpp/server_builder.h"
#include "tools/commands.h"
#include "tools/obs_flags.h"
#include "tools/server_flags.h"
#include "tools/tls_flags.h"

namespace granary {

ServerStartup::ServerStartup(absl::string_view component, int argc, char** argv)
    : component_(component) {
  ParseCommandFlags(argc, argv);
  BlockTerminationSignals();
}

int ServerStartup::Fail(const absl::Status& status) const {
  std::fprintf(stderr, "granary %s: %s\n", component_.c_str(),
               std::string(status.message()).c_str());
  return 1;
}

absl::Status ServerStartup::InstallLogFormat(absl::string_view instance) {
  instance_ = std::string(instance);
  return InstallLogFormatFromFlags({component_, instance_});
}

absl::Status ServerStartup::Secure() {
  security_ = TransportSecurityFromFlags();
  ASSIGN_OR_RETURN(credentials_, ServerCredentialsFor(security_));
  WarnIfPlaintextOnNetwork(security_);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HttpServer>> ServerStartup::StartOpsServer(
    MetricRegistry& metrics, std::map<std::string, HttpHandler> pages) {
  absl::StatusOr<std::unique_ptr<HttpServer>> ops =
      StartOpsServerFromFlags(metrics, ready_, std::move(pages));
  if (!ops.ok()) return Annotate(ops.status(), "--metrics_port");
  return ops;
}

absl::StatusOr<std::unique_ptr<grpc::Server>> ServerStartup::Listen(
    const std::vector<grpc::Service*>& services) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(ListenAddress(), credentials_, &port_);
  builder.SetMaxReceiveMessageSize(MaxMessageBytes());
  builder.SetMaxSendMessageSize(-1);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", ListenAddress()));
  }
  return server;
}

std::string ServerStartup::address() const {
  return absl::StrCat(absl::GetFlag(FLAGS_host), ":", port_);
}

void ServerStartup::ServeUntilTerminated(const HttpServer* ops, grpc::Server& server) {
  const std::string who = instance_.empty() ? component_ : absl::StrCat(component_, " ", instance_);
  std::printf("granary %s%s%s\n", who.c_str(), kListeningOn, address().c_str());
  if (ops != nullptr) std::printf("%s\n", OpsServerLine(component_, *ops).c_str());
  std::fflush(stdout);
  ready_ = true;
  const int signal = WaitForTerminationSignal();
  LOG(INFO) << "signal " << signal << ": shutting down";
  server.Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace granary
