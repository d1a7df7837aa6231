#include "etcd/etcd_watch.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace granary::etcd {
namespace {

constexpr absl::Duration kPauseBetweenStreams = absl::Milliseconds(50);

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdWatch>> EtcdWatch::Start(EtcdClient* client, std::string key,
                                                            std::string range_end,
                                                            int64_t start_revision,
                                                            EventsCallback on_events,
                                                            EndCallback on_end,
                                                            OnCompacted on_compacted) {
  if (start_revision < 1) {
    return absl::InvalidArgumentError(absl::StrCat("etcd watch of \"", absl::CHexEscape(key),
                                                   "\": start_revision must be >= 1, is ",
                                                   start_revision));
  }
  if (!on_events || !on_end) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd watch of \"", absl::CHexEscape(key), "\": a callback is empty"));
  }
  return std::unique_ptr<EtcdWatch>(new EtcdWatch(client, std::move(key), std::move(range_end),
                                                  start_revision, std::move(on_events),
                                                  std::move(on_end), on_compacted));
}

EtcdWatch::EtcdWatch(EtcdClient* client, std::string key, std::string range_end,
                     int64_t start_revision, EventsCallback on_events, EndCallback on_end,
                     OnCompacted on_compacted)
    : client_(client),
      key_(std::move(key)),
      range_end_(std::move(range_end)),
      on_events_(std::move(on_events)),
      on_end_(std::move(on_end)),
      on_compacted_(on_compacted),
      next_revision_(start_revision) {
  thread_ = std::thread([this] { Run(); });
}

EtcdWatch::~EtcdWatch() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  thread_.join();
}

int64_t EtcdWatch::next_revision() const {
  absl::MutexLock lock(&mu_);
  return next_revision_;
}

absl::Status EtcdWatch::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

int EtcdWatch::streams_opened() const {
  absl::MutexLock lock(&mu_);
  return streams_opened_;
}

absl::Status EtcdWatch::WaitUntilCreated(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  const auto created_or_ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return created_ || !status_.ok();
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&created_or_ended), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(Describe(next_revision_),
                                                    ": no member confirmed the watch within ",
                                                    absl::FormatDuration(timeout)));
  }
  return status_;
}

std::string EtcdWatch::Describe(int64_t revision) const {
  return absl::StrCat("etcd watch of [\"", absl::CHexEscape(key_), "\", \"",
                      absl::CHexEscape(range_end_), "\") from revision ", revision);
}

void EtcdWatch::Run() {
  size_t index = client_->current_endpoint();
  while (true) {
    const absl::Status end = Stream(index);
    if (!end.ok()) {
      {
        absl::MutexLock lock(&mu_);
        status_ = end;
      }
      on_end_(end);
      return;
    }
    index = client_->FailedOver(index);
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), kPauseBetweenStreams)) return;
  }
}

absl::Status EtcdWatch::Stream(size_t index) {
  grpc::ClientContext context;
  EtcdClient::PrepareContext(&context, absl::InfiniteFuture());
  etcdserverpb::WatchRequest request;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::OkStatus();
    context_ = &context;
    ++streams_opened_;
    etcdserverpb::WatchCreateRequest* create = request.mutable_create_request();
    create->set_key(key_);
    create->set_range_end(range_end_);
    create->set_start_revision(next_revision_);
  }
  const std::string& endpoint = client_->endpoints()[index];
  etcdserverpb::Watch::Stub stub(client_->channel(index));
  std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>>
      stream = stub.Watch(&context);
  absl::Status end;
  if (stream->Write(request)) {
    etcdserverpb::WatchResponse response;
    while (end.ok() && stream->Read(&response)) end = Handle(response, endpoint);
  }
  // Handle's request for a new stream from the compact revision (kResumeAtCompactRevision).
  if (absl::IsAborted(end)) end = absl::OkStatus();
  // Reads may be left (after an end): cancel so that Finish returns at once.
  context.TryCancel();
  stream->Finish().IgnoreError();
  absl::MutexLock lock(&mu_);
  context_ = nullptr;
  return end;
}

absl::Status EtcdWatch::Handle(const etcdserverpb::WatchResponse& response,
                               const std::string& endpoint) {
  if (response.canceled()) {
    const int64_t asked = next_revision();
    if (response.compact_revision() > 0 && on_compacted_ == OnCompacted::kResumeAtCompactRevision) {
      {
        absl::MutexLock lock(&mu_);
        next_revision_ = response.compact_revision();
      }
      on_events_(google::protobuf::RepeatedPtrField<mvccpb::Event>());
      return absl::AbortedError("resume at the compact revision on a new stream");
    }
    if (response.compact_revision() > 0) {
      return absl::OutOfRangeError(
          absl::StrCat(Describe(asked), " on ", endpoint, ": revision ", asked,
                       " is compacted; etcd's compact revision is ", response.compact_revision(),
                       " (the oldest revision still watchable): reload from a snapshot"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        Describe(asked), " on ", endpoint, ": canceled by etcd: ", response.cancel_reason()));
  }
  if (response.created()) {
    absl::MutexLock lock(&mu_);
    created_ = true;
  }
  if (response.events_size() > 0) {
    on_events_(response.events());
    absl::MutexLock lock(&mu_);
    next_revision_ = response.events(response.events_size() - 1).kv().mod_revision() + 1;
  }
  return absl::OkStatus();
}

}  // namespace granary::etcd
