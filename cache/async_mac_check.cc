#include "cache/async_mac_check.h"

namespace granary {

AsyncMacCheck::AsyncMacCheck(std::unique_ptr<CacheChunkGuard::MacCheck> check)
    : check_(std::move(check)), thread_([this] { Hash(); }) {}

AsyncMacCheck::~AsyncMacCheck() {
  {
    absl::MutexLock lock(&mu_);
    abandoned_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void AsyncMacCheck::Add(const std::string& record) {
  absl::MutexLock lock(&mu_);
  queued_.push_back(&record);
}

absl::Status AsyncMacCheck::Finish() {
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  thread_.join();
  return check_->Finish();
}

void AsyncMacCheck::Hash() {
  for (;;) {
    const std::string* record = nullptr;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](AsyncMacCheck* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
            return c->abandoned_ || c->closed_ || !c->queued_.empty();
          },
          this));
      if (abandoned_ || queued_.empty()) return;  // abandoned, or closed and all hashed
      record = queued_.front();
      queued_.pop_front();
    }
    check_->Add(*record);
  }
}

}  // namespace granary
