#include "etcd/etcd_client.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace granary::etcd {
namespace {

// etcd's answer (before applying anything) from a member that knows no raft leader, to a call
// carrying its "hasleader" metadata.
constexpr char kNoLeader[] = "etcdserver: no leader";

// The gRPC channel arguments of every endpoint: reconnect quickly after a member comes back
// (gRPC's default backoff grows to two minutes), notice a silent peer on long-lived streams by
// keepalive pings (at etcd's default --grpc-keepalive-min-time, 5 s, or slower, so etcd does
// not close the connection for pinging too often), and accept responses up to the limit.
grpc::ChannelArguments ChannelArgumentsFor(const EtcdClientOptions& options) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  arguments.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  arguments.SetMaxReceiveMessageSize(options.max_response_bytes);
  // Each channel its own subchannels, so that a channel made afresh (FailedOver) connects afresh.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return arguments;
}

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// Whether `status` says the endpoint could not be reached (so another one may answer).
bool Unreachable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

// What a failure to reach a member over TLS means, for the error ("" when `message`, gRPC's,
// says nothing of TLS or the channel is plain text). gRPC reports a member certificate this
// client does not trust as a failed handshake, and a member refusing the client's certificate
// (or its lack of one: etcd's --client-cert-auth) as a connection read failing, closed or reset
// right after the handshake (which of them depends on timing).
std::string TlsDiagnosis(const TransportSecurity& security, const std::string& message) {
  if (!security.tls()) return "";
  if (absl::StrContains(message, "Ssl handshake failed")) {
    return absl::StrCat(
        " (TLS: this client does not trust the member's certificate; is it signed "
        "by the CA of ",
        security.names.ca, " ", security.ca_file, "?)");
  }
  if (absl::StrContains(message, "Endpoint read failed") ||
      absl::StrContains(message, "Socket closed") ||
      absl::StrContains(message, "Connection reset by peer")) {
    const std::string offered =
        security.cert_file.empty()
            ? absl::StrCat("this client offers no certificate (", security.names.cert, ")")
            : absl::StrCat("is its certificate (", security.names.cert, " ", security.cert_file,
                           ") signed by a CA the members trust (etcd --trusted-ca-file)?");
    return absl::StrCat(
        " (TLS: the member closed the connection after the handshake, as etcd "
        "does when it refuses a client's certificate; ",
        offered, ")");
  }
  return "";
}

// Waits until `channel` is connected, or fails: false when it is in (or falls into) transient
// failure or `deadline` passes first, so a write that was never sent can go elsewhere.
bool Connected(grpc::Channel& channel, absl::Time deadline, std::string* why) {
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      *why = "cannot connect (the channel is in transient failure)";
      return false;
    }
    if (!channel.WaitForStateChange(state, absl::ToChronoTime(deadline))) {
      *why = "not connected before the call's deadline";
      return false;
    }
    state = channel.GetState(/*try_to_connect=*/true);
  }
  return true;
}

etcdserverpb::Compare MakeCompare(const std::string& key,
                                  etcdserverpb::Compare::CompareTarget target,
                                  etcdserverpb::Compare::CompareResult result) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(target);
  compare.set_result(result);
  return compare;
}

}  // namespace

namespace txn {

etcdserverpb::Compare CreateRevision(const std::string& key,
                                     etcdserverpb::Compare::CompareResult result,
                                     int64_t revision) {
  etcdserverpb::Compare compare = MakeCompare(key, etcdserverpb::Compare::CREATE, result);
  compare.set_create_revision(revision);
  return compare;
}

etcdserverpb::Compare ModRevision(const std::string& key,
                                  etcdserverpb::Compare::CompareResult result, int64_t revision) {
  etcdserverpb::Compare compare = MakeCompare(key, etcdserverpb::Compare::MOD, result);
  compare.set_mod_revision(revision);
  return compare;
}

etcdserverpb::Compare Version(const std::string& key, etcdserverpb::Compare::CompareResult result,
                              int64_t version) {
  etcdserverpb::Compare compare = MakeCompare(key, etcdserverpb::Compare::VERSION, result);
  compare.set_version(version);
  return compare;
}

etcdserverpb::Compare Value(const std::string& key, etcdserverpb::Compare::CompareResult result,
                            const std::string& value) {
  etcdserverpb::Compare compare = MakeCompare(key, etcdserverpb::Compare::VALUE, result);
  compare.set_value(value);
  return compare;
}

etcdserverpb::RequestOp PutOp(const std::string& key, const std::string& value, int64_t lease) {
  etcdserverpb::RequestOp op;
  etcdserverpb::PutRequest* put = op.mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  return op;
}

etcdserverpb::RequestOp RangeOp(const std::string& key, const std::string& range_end) {
  etcdserverpb::RequestOp op;
  op.mutable_request_range()->set_key(key);
  op.mutable_request_range()->set_range_end(range_end);
  return op;
}

etcdserverpb::RequestOp DeleteOp(const std::string& key, const std::string& range_end) {
  etcdserverpb::RequestOp op;
  op.mutable_request_delete_range()->set_key(key);
  op.mutable_request_delete_range()->set_range_end(range_end);
  return op;
}

}  // namespace txn

std::string PrefixRangeEnd(const std::string& prefix) {
  // The smallest key greater than every key starting with `prefix`: the prefix with its last
  // byte below 0xff incremented (and what follows that byte dropped).
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(EtcdClientOptions options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("etcd client: endpoints is empty (want host:port, ...)");
  }
  for (const std::string& endpoint : options.endpoints) {
    if (endpoint.empty() || endpoint.find(':') == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd client: endpoint \"", endpoint, "\" is not host:port"));
    }
  }
  if (options.call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd client: call_timeout must be positive, is ",
                     absl::FormatDuration(options.call_timeout)));
  }
  if (options.max_response_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd client: max_response_bytes must be positive, is ", options.max_response_bytes));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                   ChannelCredentialsFor(options.security));
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(options), std::move(credentials)));
}

EtcdClient::EtcdClient(EtcdClientOptions options,
                       std::shared_ptr<grpc::ChannelCredentials> credentials)
    : options_(std::move(options)),
      credentials_(std::move(credentials)),
      arguments_(ChannelArgumentsFor(options_)) {
  for (const std::string& endpoint : options_.endpoints) {
    channels_.push_back(grpc::CreateCustomChannel(endpoint, credentials_, arguments_));
  }
}

std::shared_ptr<grpc::Channel> EtcdClient::channel(size_t index) const {
  absl::MutexLock lock(&mu_);
  return channels_[index];
}

size_t EtcdClient::current_endpoint() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

void EtcdClient::RenewIfFailed(size_t index) {
  if (channels_[index]->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    channels_[index] =
        grpc::CreateCustomChannel(options_.endpoints[index], credentials_, arguments_);
  }
}

size_t EtcdClient::FailedOver(size_t failed) {
  absl::MutexLock lock(&mu_);
  RenewIfFailed(failed);
  if (current_ == failed) current_ = (failed + 1) % channels_.size();
  return current_;
}

void EtcdClient::PrepareContext(grpc::ClientContext* context, absl::Time deadline) {
  if (deadline != absl::InfiniteFuture()) context->set_deadline(absl::ToChronoTime(deadline));
  context->AddMetadata("hasleader", "true");
}

template <typename Stub, typename Request, typename Response>
absl::StatusOr<Response> EtcdClient::Call(const char* method, Retry retry,
                                          grpc::Status (Stub::*rpc)(grpc::ClientContext*,
                                                                    const Request&, Response*),
                                          const Request& request) {
  const size_t count = options_.endpoints.size();
  const size_t first = current_endpoint();
  std::vector<std::string> tried;
  std::vector<std::string> failures;
  const auto prefix = [&] {
    return absl::StrCat("etcd ", absl::StrJoin(tried, ","), ": ", method, ": ");
  };
  for (size_t attempt = 0; attempt < count; ++attempt) {
    const size_t index = (first + attempt) % count;
    const std::string& endpoint = options_.endpoints[index];
    tried.push_back(endpoint);
    const absl::Time deadline = absl::Now() + options_.call_timeout;
    const std::shared_ptr<grpc::Channel> channel = this->channel(index);
    std::string not_connected;
    if (retry == Retry::kIfNotSent && !Connected(*channel, deadline, &not_connected)) {
      failures.push_back(absl::StrCat(endpoint, ": ", not_connected));
      FailedOver(index);
      continue;
    }
    grpc::ClientContext context;
    PrepareContext(&context, deadline);
    Response response;
    Stub stub(channel);
    const grpc::Status status = (stub.*rpc)(&context, request, &response);
    if (status.ok()) return response;
    failures.push_back(absl::StrCat(endpoint, ": ", status.error_message(),
                                    TlsDiagnosis(options_.security, status.error_message())));
    if (!Unreachable(status)) {
      // etcd's own answer (or gRPC's about the request itself): the same everywhere.
      return absl::Status(FromGrpc(status).code(), prefix() + status.error_message());
    }
    FailedOver(index);
    if (retry == Retry::kIfNotSent && status.error_message() != kNoLeader) {
      return absl::UnknownError(absl::StrCat(prefix(), "outcome unknown: the request was sent to ",
                                             endpoint, ", then ", status.error_message(), " (",
                                             absl::StrJoin(failures, "; "),
                                             "); read back to learn whether it was applied"));
    }
  }
  return absl::UnavailableError(
      absl::StrCat(prefix(), "no endpoint answered: ", absl::StrJoin(failures, "; ")));
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(const std::string& key,
                                                              const std::string& range_end,
                                                              int64_t revision, int64_t limit) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  request.set_range_end(range_end);
  request.set_revision(revision);
  request.set_limit(limit);
  return Range(request);
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(
    const etcdserverpb::RangeRequest& request) {
  return Call("Range", Retry::kAlways, &etcdserverpb::KV::Stub::Range, request);
}

absl::StatusOr<etcdserverpb::PutResponse> EtcdClient::Put(const std::string& key,
                                                          const std::string& value, int64_t lease) {
  etcdserverpb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  return Call("Put", Retry::kIfNotSent, &etcdserverpb::KV::Stub::Put, request);
}

absl::StatusOr<etcdserverpb::DeleteRangeResponse> EtcdClient::DeleteRange(
    const std::string& key, const std::string& range_end) {
  etcdserverpb::DeleteRangeRequest request;
  request.set_key(key);
  request.set_range_end(range_end);
  return Call("DeleteRange", Retry::kIfNotSent, &etcdserverpb::KV::Stub::DeleteRange, request);
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& request) {
  return Call("Txn", Retry::kIfNotSent, &etcdserverpb::KV::Stub::Txn, request);
}

absl::StatusOr<etcdserverpb::CompactionResponse> EtcdClient::Compact(int64_t revision,
                                                                     bool physical) {
  etcdserverpb::CompactionRequest request;
  request.set_revision(revision);
  request.set_physical(physical);
  return Call("Compact", Retry::kIfNotSent, &etcdserverpb::KV::Stub::Compact, request);
}

absl::StatusOr<etcdserverpb::LeaseGrantResponse> EtcdClient::LeaseGrant(int64_t ttl_seconds) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  ASSIGN_OR_RETURN(
      etcdserverpb::LeaseGrantResponse response,
      (Call("LeaseGrant", Retry::kIfNotSent, &etcdserverpb::Lease::Stub::LeaseGrant, request)));
  if (!response.error().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd ", absl::StrJoin(endpoints(), ","), ": LeaseGrant: ", response.error()));
  }
  return response;
}

absl::StatusOr<etcdserverpb::LeaseRevokeResponse> EtcdClient::LeaseRevoke(int64_t id) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(id);
  return Call("LeaseRevoke", Retry::kIfNotSent, &etcdserverpb::Lease::Stub::LeaseRevoke, request);
}

absl::StatusOr<etcdserverpb::LeaseTimeToLiveResponse> EtcdClient::LeaseTimeToLive(int64_t id,
                                                                                  bool keys) {
  etcdserverpb::LeaseTimeToLiveRequest request;
  request.set_id(id);
  request.set_keys(keys);
  return Call("LeaseTimeToLive", Retry::kAlways, &etcdserverpb::Lease::Stub::LeaseTimeToLive,
              request);
}

absl::StatusOr<etcdserverpb::StatusResponse> EtcdClient::Status(const std::string& endpoint) {
  size_t index = 0;
  while (index < options_.endpoints.size() && options_.endpoints[index] != endpoint) ++index;
  if (index == options_.endpoints.size()) {
    return absl::InvalidArgumentError(absl::StrCat("etcd Status: \"", endpoint,
                                                   "\" is not one of the client's endpoints ",
                                                   absl::StrJoin(endpoints(), ",")));
  }
  grpc::ClientContext context;
  // No "hasleader": the status of a member without a leader is what this call is for.
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  etcdserverpb::StatusResponse response;
  const grpc::Status status = etcdserverpb::Maintenance::NewStub(channel(index))
                                  ->Status(&context, etcdserverpb::StatusRequest(), &response);
  if (!status.ok()) {
    absl::MutexLock lock(&mu_);
    RenewIfFailed(index);
    return absl::Status(FromGrpc(status).code(),
                        absl::StrCat("etcd ", endpoint, ": Status: ", status.error_message()));
  }
  return response;
}

}  // namespace granary::etcd
