#include "tools/replica_probe.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/dispatcher_targets.h"
#include "common/leader_redirect.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "proto/dispatcher.grpc.pb.h"

namespace granary {
namespace {

// ", applied seq S, lag R records": what `probe` knows of them.
std::string ProgressText(const ReplicaProbe& probe) {
  std::string text;
  if (probe.applied_seq.has_value()) absl::StrAppend(&text, ", applied seq ", *probe.applied_seq);
  if (probe.lag_records.has_value()) {
    absl::StrAppend(&text, ", lag ", *probe.lag_records, " records");
  }
  return text;
}

ReplicaProbe Probe(const std::string& address,
                   const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                   absl::Duration deadline) {
  ReplicaProbe probe;
  probe.address = address;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  std::unique_ptr<Dispatcher::Stub> stub =
      Dispatcher::NewStub(grpc::CreateCustomChannel(address, credentials, args));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  GetStatusRequest request;
  request.set_summary(true);
  GetStatusResponse response;
  const grpc::Status status = stub->GetStatus(&context, request, &response);
  if (status.ok()) {
    probe.role = ReplicaProbe::Role::kLeader;
    probe.applied_seq = response.state().applied_seq();
    return probe;
  }
  if (uint64_t applied = 0;
      absl::SimpleAtoi(TrailingMetadataOf(context, kAppliedSeqMetadataKey), &applied)) {
    probe.applied_seq = applied;
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    probe.leader = RedirectedLeaderOf(context);
    if (!probe.leader.empty()) {
      probe.role = ReplicaProbe::Role::kFollower;
      return probe;
    }
  }
  probe.error = status.error_message();
  return probe;
}

}  // namespace

std::vector<ReplicaProbe> ProbeReplicas(
    const std::vector<std::string>& addresses,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials, absl::Duration deadline) {
  std::vector<ReplicaProbe> probes(addresses.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < addresses.size(); ++i) {
    threads.emplace_back([&, i] { probes[i] = Probe(addresses[i], credentials, deadline); });
  }
  for (std::thread& thread : threads) thread.join();
  const auto leader = std::find_if(probes.begin(), probes.end(), [](const ReplicaProbe& probe) {
    return probe.role == ReplicaProbe::Role::kLeader;
  });
  if (leader == probes.end()) return probes;
  for (ReplicaProbe& probe : probes) {
    if (!probe.applied_seq.has_value()) continue;
    probe.lag_records =
        *leader->applied_seq > *probe.applied_seq ? *leader->applied_seq - *probe.applied_seq : 0;
  }
  return probes;
}

std::string ReplicasText(const std::vector<ReplicaProbe>& probes) {
  std::string text = absl::StrCat("replicas (", probes.size(), "):\n");
  for (const ReplicaProbe& probe : probes) {
    switch (probe.role) {
      case ReplicaProbe::Role::kLeader:
        absl::StrAppend(&text, "  ", probe.address, "  leader", ProgressText(probe), "\n");
        break;
      case ReplicaProbe::Role::kFollower:
        absl::StrAppend(&text, "  ", probe.address, "  follower (leader ", probe.leader, ")",
                        ProgressText(probe), "\n");
        break;
      case ReplicaProbe::Role::kNotServing:
        absl::StrAppend(&text, "  ", probe.address, "  not serving: ", probe.error,
                        ProgressText(probe), "\n");
        break;
    }
  }
  return text;
}

google::protobuf::Value ReplicasJson(const std::vector<ReplicaProbe>& probes) {
  google::protobuf::Value list;
  google::protobuf::ListValue& values = *list.mutable_list_value();
  for (const ReplicaProbe& probe : probes) {
    google::protobuf::Struct& object = *values.add_values()->mutable_struct_value();
    auto& fields = *object.mutable_fields();
    fields["address"].set_string_value(probe.address);
    switch (probe.role) {
      case ReplicaProbe::Role::kLeader:
        fields["role"].set_string_value("leader");
        break;
      case ReplicaProbe::Role::kFollower:
        fields["role"].set_string_value("follower");
        fields["leader"].set_string_value(probe.leader);
        break;
      case ReplicaProbe::Role::kNotServing:
        fields["role"].set_string_value("not_serving");
        fields["error"].set_string_value(probe.error);
        break;
    }
    if (probe.applied_seq.has_value()) {
      fields["applied_seq"].set_number_value(static_cast<double>(*probe.applied_seq));
    }
    if (probe.lag_records.has_value()) {
      fields["lag_records"].set_number_value(static_cast<double>(*probe.lag_records));
    }
  }
  return list;
}

}  // namespace granary
