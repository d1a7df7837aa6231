#include "common/thread_pool.h"

#include <algorithm>

namespace granary {

ThreadPool::ThreadPool(int num_threads) : active_(num_threads) {
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this, i] { WorkLoop(i); });
}

void ThreadPool::SetActiveThreads(int n) {
  absl::MutexLock lock(&mu_);
  active_ = std::clamp(n, 1, static_cast<int>(threads_.size()));
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::Schedule(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(fn));
}

void ThreadPool::WorkLoop(int index) {
  const auto may_run = [this, index]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || (!queue_.empty() && index < active_);
  };
  while (true) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&may_run));
      if (queue_.empty()) return;  // stopping_ and drained.
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

}  // namespace granary
