#include "etcd/lease_keep_alive.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace granary::etcd {
namespace {

// How soon a refresh that failed on every endpoint is tried again.
constexpr absl::Duration kRetryPause = absl::Milliseconds(100);

std::string LeaseName(int64_t id) { return absl::StrCat("lease ", absl::Hex(id)); }

}  // namespace

absl::StatusOr<std::unique_ptr<LeaseKeepAlive>> LeaseKeepAlive::Start(
    EtcdClient* client, int64_t id, int64_t ttl_seconds, LostCallback on_lost, Env* clock) {
  if (ttl_seconds < 1) {
    return absl::InvalidArgumentError(absl::StrCat("etcd keep-alive of ", LeaseName(id),
                                                   ": ttl_seconds must be >= 1, is ", ttl_seconds));
  }
  if (!on_lost) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd keep-alive of ", LeaseName(id), ": on_lost is empty"));
  }
  std::unique_ptr<LeaseKeepAlive> keep_alive(
      new LeaseKeepAlive(client, id, ttl_seconds, std::move(on_lost), clock));
  RETURN_IF_ERROR(keep_alive->Refresh());
  keep_alive->thread_ = std::thread([raw = keep_alive.get()] { raw->Run(); });
  return keep_alive;
}

LeaseKeepAlive::LeaseKeepAlive(EtcdClient* client, int64_t id, int64_t ttl_seconds,
                               LostCallback on_lost, Env* clock)
    : client_(client),
      id_(id),
      interval_(absl::Seconds(ttl_seconds) / 3),
      on_lost_(std::move(on_lost)),
      clock_(clock) {}

LeaseKeepAlive::~LeaseKeepAlive() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

bool LeaseKeepAlive::alive() const {
  absl::MutexLock lock(&mu_);
  return status_.ok();
}

absl::Status LeaseKeepAlive::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

absl::Duration LeaseKeepAlive::valid_for() const {
  const uint64_t now = clock_->NowMicros();
  absl::MutexLock lock(&mu_);
  return valid_until_micros_ > now
             ? absl::Microseconds(static_cast<int64_t>(valid_until_micros_ - now))
             : absl::ZeroDuration();
}

int64_t LeaseKeepAlive::refreshes() const {
  absl::MutexLock lock(&mu_);
  return refreshes_;
}

absl::StatusOr<int64_t> LeaseKeepAlive::RefreshOn(size_t index) {
  grpc::ClientContext context;
  EtcdClient::PrepareContext(&context, absl::Now() + client_->call_timeout());
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("stopping");
    context_ = &context;
  }
  etcdserverpb::Lease::Stub stub(client_->channel(index));
  std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                           etcdserverpb::LeaseKeepAliveResponse>>
      stream = stub.LeaseKeepAlive(&context);
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(id_);
  etcdserverpb::LeaseKeepAliveResponse response;
  const bool answered = stream->Write(request) && stream->Read(&response);
  context.TryCancel();
  const grpc::Status finished = stream->Finish();
  {
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
  }
  if (!answered) {
    return absl::UnavailableError(
        absl::StrCat(client_->endpoints()[index], ": ", finished.error_message()));
  }
  return response.ttl();
}

absl::Status LeaseKeepAlive::Refresh() {
  const size_t count = client_->endpoints().size();
  size_t index = client_->current_endpoint();
  std::vector<std::string> tried;
  std::vector<std::string> failures;
  for (size_t attempt = 0; attempt < count; ++attempt) {
    const uint64_t sent = clock_->NowMicros();
    tried.push_back(client_->endpoints()[index]);
    const absl::StatusOr<int64_t> ttl = RefreshOn(index);
    if (ttl.ok()) {
      if (*ttl <= 0) {
        return absl::NotFoundError(
            absl::StrCat("etcd ", client_->endpoints()[index], ": ", LeaseName(id_),
                         " expired or was revoked (keep-alive answered TTL ", *ttl, ")"));
      }
      absl::MutexLock lock(&mu_);
      valid_until_micros_ =
          std::max(valid_until_micros_, sent + static_cast<uint64_t>(*ttl) * 1'000'000);
      ++refreshes_;
      return absl::OkStatus();
    }
    if (absl::IsCancelled(ttl.status())) return ttl.status();
    failures.push_back(std::string(ttl.status().message()));
    index = client_->FailedOver(index);
  }
  return absl::UnavailableError(absl::StrCat("etcd ", absl::StrJoin(tried, ","), ": keep-alive of ",
                                             LeaseName(id_), ": ", absl::StrJoin(failures, "; ")));
}

void LeaseKeepAlive::Run() {
  absl::Duration pause = interval_;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), pause)) return;
    }
    absl::Status refreshed = Refresh();
    if (refreshed.ok()) {
      pause = interval_;
      continue;
    }
    if (absl::IsCancelled(refreshed)) return;
    if (!absl::IsNotFound(refreshed)) {
      const absl::Duration valid_for = this->valid_for();
      if (valid_for > absl::ZeroDuration()) {
        pause = std::min(kRetryPause, valid_for);
        continue;
      }
      refreshed = absl::DeadlineExceededError(absl::StrCat(
          "etcd keep-alive of ", LeaseName(id_),
          ": not refreshed before its TTL since the last refresh ran out, when it may have "
          "expired: ",
          refreshed.message()));
    }
    {
      absl::MutexLock lock(&mu_);
      status_ = refreshed;
    }
    on_lost_(refreshed);
    return;
  }
}

}  // namespace granary::etcd
