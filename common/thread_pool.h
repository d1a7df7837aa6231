// A fixed pool of threads running closures in FIFO order; of them, only the first "active" ones
// take closures (all, unless SetActiveThreads says otherwise), so a stage whose parallelism is
// tuned keeps its work on as many threads as it is allowed.
//
// Thread-safe. The destructor runs every closure already scheduled, then joins the threads.
#ifndef GRANARY_COMMON_THREAD_POOL_H_
#define GRANARY_COMMON_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace granary {

class ThreadPool {
 public:
  // REQUIRES: num_threads >= 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> fn);
  int num_threads() const { return static_cast<int>(threads_.size()); }
  // From now on only threads [0, n) take closures (n clamped to [1, num_threads()]); a closure
  // already running finishes where it is. The destructor drains the queue with every thread.
  void SetActiveThreads(int n);

 private:
  void WorkLoop(int index);

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int active_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace granary

#endif  // GRANARY_COMMON_THREAD_POOL_H_
