// granary scale: sets a job's tasks per consumer — for its running epoch (tasks join on more
// workers, or the newest are shed, exactly once throughout) and the epochs after (issue 17).
//
//   granary scale --dispatcher HOST:PORT --job NAME_OR_ID --workers N [--local_workers L]
//                 [--reason R] (TLS flags)
//
// --workers sets the remote tasks per consumer; --local_workers, when given, also the local ones
// (tasks for the local workers of each consumer, which its client started: JobSpec.local_workers).
#include <chrono>
#include <cstdio>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/dispatcher_targets.h"
#include "common/grpc_status.h"
#include "grpcpp/create_channel.h"
#include "proto/dispatcher.grpc.pb.h"
#include "tools/command_flags.h"
#include "tools/commands.h"
#include "tools/tls_flags.h"

GRANARY_COMMAND_BORROWS_FLAG(std::string, dispatcher);
GRANARY_COMMAND_BORROWS_FLAG(int, workers);
GRANARY_COMMAND_BORROWS_FLAG(int32_t, local_workers);
GRANARY_COMMAND_BORROWS_FLAG(std::string, job_owner);  // run_command.cc
ABSL_FLAG(std::string, job, "", "The job to scale: its name, or its id.");
ABSL_FLAG(std::string, reason, "by hand (granary scale)", "Why, for `granary status`.");

namespace granary {

int ScaleCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "granary scale --dispatcher HOST:PORT --job NAME_OR_ID [--job_owner CLIENT] --workers N "
      "[--local_workers L] [--reason R] "
      "(--tls_ca CA [--tls_cert C --tls_key K] | --insecure)");
  // Whether --local_workers was given (its default, shared with `granary run`, is 0).
  bool local_given = false;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    local_given =
        local_given || arg == "--local_workers" || absl::StartsWith(arg, "--local_workers=");
  }
  ParseCommandFlags(argc, argv);
  const std::string address = absl::GetFlag(FLAGS_dispatcher);
  const std::string job = absl::GetFlag(FLAGS_job);
  if (address.empty() || job.empty()) {
    std::fprintf(stderr, "granary scale: --dispatcher and --job are required\n");
    return 2;
  }
  const absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFor(TransportSecurityFromFlags());
  if (!credentials.ok()) {
    std::fprintf(stderr, "granary scale: %s\n",
                 std::string(credentials.status().message()).c_str());
    return 2;
  }
  ScaleJobRequest request;
  int64_t job_id = 0;
  if (absl::SimpleAtoi(job, &job_id) && job_id > 0) {
    request.set_job_id(job_id);
  } else {
    request.set_job_name(job);
    request.set_job_owner(absl::GetFlag(FLAGS_job_owner));
  }
  request.set_num_worker_slots(absl::GetFlag(FLAGS_workers));
  if (local_given) request.set_num_local_slots(absl::GetFlag(FLAGS_local_workers));
  request.set_reason(absl::GetFlag(FLAGS_reason));
  absl::StatusOr<std::unique_ptr<DispatcherTargets>> dispatcher =
      DispatcherTargets::Create(address, "--dispatcher", *credentials, {});
  if (!dispatcher.ok()) {
    std::fprintf(stderr, "granary scale: %s\n", std::string(dispatcher.status().message()).c_str());
    return 2;
  }
  ScaleJobResponse response;
  const grpc::Status rpc =
      (*dispatcher)
          ->Call(
              [] {
                auto context = std::make_unique<grpc::ClientContext>();
                context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
                return context;
              },
              [&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
                return stub.ScaleJob(context, request, &response);
              });
  if (!rpc.ok()) {
    std::fprintf(stderr, "granary scale: dispatcher %s: %s\n", address.c_str(),
                 rpc.error_message().c_str());
    return 1;
  }
  std::printf("job %s: %d remote%s tasks per consumer; its running epoch has %d leasing\n",
              job.c_str(), request.num_worker_slots(),
              request.has_num_local_slots()
                  ? absl::StrCat(" + ", request.num_local_slots(), " local").c_str()
                  : "",
              response.running_tasks_per_consumer());
  return 0;
}

}  // namespace granary
