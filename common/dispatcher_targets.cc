#include "common/dispatcher_targets.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/leader_redirect.h"
#include "grpcpp/create_channel.h"

namespace granary {

absl::StatusOr<std::unique_ptr<DispatcherTargets>> DispatcherTargets::Create(
    absl::string_view addresses, absl::string_view flag,
    std::shared_ptr<grpc::ChannelCredentials> credentials, grpc::ChannelArguments arguments) {
  std::vector<std::string> split = absl::StrSplit(addresses, ',');
  for (const std::string& address : split) {
    if (address.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " '", addresses, "': expected host:port, or several separated by commas"));
    }
  }
  return std::unique_ptr<DispatcherTargets>(
      new DispatcherTargets(std::move(split), std::move(credentials), std::move(arguments)));
}

DispatcherTargets::DispatcherTargets(std::vector<std::string> addresses,
                                     std::shared_ptr<grpc::ChannelCredentials> credentials,
                                     grpc::ChannelArguments arguments)
    : addresses_(std::move(addresses)),
      credentials_(std::move(credentials)),
      arguments_(std::move(arguments)),
      current_(addresses_.front()) {}

DispatcherTargets::Target DispatcherTargets::TargetAt(const std::string& address) const {
  Made& made = made_[address];
  if (made.stub == nullptr) {
    made.channel = grpc::CreateCustomChannel(address, credentials_, arguments_);
    made.stub = Dispatcher::NewStub(made.channel);
  }
  return Target{address, made.channel, made.stub.get()};
}

DispatcherTargets::Target DispatcherTargets::Current() const {
  absl::MutexLock lock(&mu_);
  return TargetAt(current_);
}

bool DispatcherTargets::AfterFailure(const std::string& called, const grpc::ClientContext& context,
                                     const grpc::Status& status) {
  // A dead replica answers Unavailable, or — to a call that waits for it to be ready — lets
  // the deadline pass.
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
      status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
    return false;
  }
  const std::string leader = RedirectedLeaderOf(context);
  absl::MutexLock lock(&mu_);
  if (called != current_) return !leader.empty();
  if (!leader.empty() && leader != called) {
    current_ = leader;
    return true;
  }
  MoveOnLocked();
  return false;
}

void DispatcherTargets::MoveOn(const std::string& called) {
  absl::MutexLock lock(&mu_);
  if (called == current_) MoveOnLocked();
}

void DispatcherTargets::MoveOnLocked() {
  next_ = (next_ + 1) % addresses_.size();
  current_ = addresses_[next_];
}

grpc::Status DispatcherTargets::Call(
    const std::function<std::unique_ptr<grpc::ClientContext>()>& make_context, const Rpc& rpc) {
  grpc::Status status;
  // Each given address once, and a redirect after each.
  for (size_t attempt = 0; attempt < 2 * addresses_.size(); ++attempt) {
    const Target target = Current();
    const std::unique_ptr<grpc::ClientContext> context = make_context();
    status = rpc(*target.stub, context.get());
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return status;
    AfterFailure(target.address, *context, status);
  }
  return status;
}

std::string TrailingMetadataOf(const grpc::ClientContext& context, absl::string_view key) {
  for (const auto& [name, value] : context.GetServerTrailingMetadata()) {
    if (absl::string_view(name.data(), name.size()) == key) {
      return std::string(value.data(), value.size());
    }
  }
  return "";
}

std::string RedirectedLeaderOf(const grpc::ClientContext& context) {
  return TrailingMetadataOf(context, kLeaderMetadataKey);
}

}  // namespace granary
