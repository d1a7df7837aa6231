#include "worker/leased_split_provider.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace granary {

LeasedSplitProvider::LeasedSplitProvider(DispatcherConnection* dispatcher, Env* env,
                                         int64_t task_id, int64_t lease_size,
                                         std::function<bool()> cancelled)
    : dispatcher_(dispatcher),
      env_(env),
      task_id_(task_id),
      lease_size_(lease_size),
      cancelled_(std::move(cancelled)) {}

absl::Status LeasedSplitProvider::GetNext(Split* split, bool* end) {
  int backoff_ms = 20;
  while (fetched_.empty() && !end_) {
    GetSplitsRequest request;
    request.set_task_id(task_id_);
    request.set_from_seq(next_seq_);
    request.set_max(lease_size_);
    absl::StatusOr<GetSplitsResponse> response = dispatcher_->GetSplits(request);
    if (response.ok()) {
      fetched_.assign(response->splits().begin(), response->splits().end());
      end_ = response->end_of_splits();
      continue;
    }
    const bool retriable = absl::IsUnavailable(response.status()) ||
                           absl::IsDeadlineExceeded(response.status());
    if (!retriable) {
      return Annotate(response.status(), absl::StrCat("task ", task_id_, ": leasing split ",
                                                      next_seq_));
    }
    if (cancelled_()) {
      return absl::CancelledError(absl::StrCat("task ", task_id_, ": stopped while leasing"));
    }
    env_->SleepForMicros(static_cast<uint64_t>(backoff_ms) * 1000);
    backoff_ms = std::min(backoff_ms * 2, 1000);
  }
  *end = fetched_.empty();
  if (!*end) {
    *split = std::move(fetched_.front());
    fetched_.pop_front();
    ++next_seq_;
  }
  return absl::OkStatus();
}

absl::Status LeasedSplitProvider::Save(StateWriter& writer) {
  writer.WriteInt("next_seq", next_seq_);
  return absl::OkStatus();
}

absl::Status LeasedSplitProvider::Restore(const StateReader& reader) {
  ASSIGN_OR_RETURN(next_seq_, reader.ReadInt("next_seq"));
  fetched_.clear();
  end_ = false;
  return absl::OkStatus();
}

}  // namespace granary
