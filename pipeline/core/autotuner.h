// Autotuner (issue 18, tf.data's AUTOTUNE idea): sets a pipeline's tunable knobs — the threads
// of a parallel_map stage given `num_threads: 0`, the buffer of a prefetch given
// `buffer_size: 0` — from the pipeline's measured output rate, on the cores it runs on.
//
// Hill climbing, one knob at a time: every knob starts at 1 — or where the last tuning of the
// same Pipeline ended (AutotuneMemo: a worker runs many tasks and epochs of one pipeline); the
// tuner measures the output rate over a window (at least `window` of wall time and 4 outputs),
// raises the knob by one, lets one window pass (the stage adjusts), measures again, and keeps the
// step if the rate grew by more than `min_gain`, else takes it back and moves to the next knob. A
// pass over all knobs without a kept step ends the tuning. A step that would put more bytes in the
// knobs' buffers than `memory_budget_bytes` (each knob reports its bytes per unit: a parallel_map
// keeps 2 elements in flight per thread, a prefetch one per slot) is not tried. Knob values never
// change the pipeline's output, only its speed.
//
// Thread-safe: knobs register from the pipeline's build, outputs are counted on the consumer's
// thread, and Knob::Set is called from there.
#ifndef GRANARY_PIPELINE_CORE_AUTOTUNER_H_
#define GRANARY_PIPELINE_CORE_AUTOTUNER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace granary {

struct AutotuneOptions {
  int64_t memory_budget_bytes = int64_t{1} << 30;
  absl::Duration window = absl::Milliseconds(150);
  double min_gain = 0.04;
  // The largest value a knob may take: threads of a stage, slots of a prefetch buffer.
  int max_threads = 8;
  int max_buffer = 16;
};

// Where a Pipeline's tunings end — the knobs' confirmed values and how far the climb got — for
// the next iterator of it to go on from (an epoch is often shorter than a tuning). Thread-safe.
class AutotuneMemo {
 public:
  struct Progress {
    std::vector<int> values;
    size_t next_knob = 0;     // the knob to probe next
    int untried_in_pass = 0;  // knobs left in the pass without a kept step
    bool done = false;
  };
  Progress Get() const;
  void Set(Progress progress);

 private:
  mutable absl::Mutex mu_;
  Progress progress_ ABSL_GUARDED_BY(mu_);
};

class Autotuner {
 public:
  // What an iterator exposes to be tuned. Implementations are thread-safe.
  class Knob {
   public:
    virtual ~Knob() = default;
    // Takes effect at the stage's next scheduling decision.
    virtual void Set(int value) = 0;
    // The bytes one unit of the knob holds (measured; 0 before anything was).
    virtual int64_t BytesPerUnit() const = 0;
  };
  enum class KnobKind { kThreads, kBuffer };

  // With `memo`, knobs start where its last tuning ended, and the tuning's end is stored there.
  explicit Autotuner(AutotuneOptions options = {}, std::shared_ptr<AutotuneMemo> memo = nullptr);
  // Stores the values confirmed so far in the memo (an epoch may end before the tuning does).
  ~Autotuner();

  // Adds `knob` (set here to its starting value) under `name`; it must outlive the tuner's use
  // of it (iterators are destroyed before the tuner).
  void Register(Knob* knob, KnobKind kind, std::string name);
  // Counts one output of the pipeline, at `now` (wall time); tunes when a window is complete.
  void OnOutput(absl::Time now);

  // "parallel_map op 2: 3 threads, prefetch op 7: 2 (tuning)" — the knobs' current values.
  std::string Describe() const;
  // The current values, in registration order.
  std::vector<int> Values() const;
  bool done() const;
  int max_threads() const { return options_.max_threads; }

 private:
  struct Entry {
    Knob* knob;
    KnobKind kind;
    std::string name;
    int value = 1;
    int max = 1;
  };
  enum class Phase { kBaseline, kSettle, kProbe };
  // Starts the next step from the current knob on; false when a whole pass kept nothing.
  bool StartProbe() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The values measured to be no worse than the ones before them (a step being probed is not),
  // and how far the climb got.
  AutotuneMemo::Progress Confirmed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t BudgetedBytes(size_t raised) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AutotuneOptions options_;
  const std::shared_ptr<AutotuneMemo> memo_;
  const AutotuneMemo::Progress start_;  // memo_'s when the tuner was made
  mutable absl::Mutex mu_;
  std::vector<Entry> knobs_ ABSL_GUARDED_BY(mu_);
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kBaseline;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;       // The knob being probed.
  int untried_in_pass_ ABSL_GUARDED_BY(mu_) = 0;  // Knobs left in this pass without a kept step.
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  double base_rate_ ABSL_GUARDED_BY(mu_) = 0;
  // The window being measured.
  bool window_open_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_);
  int64_t window_outputs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_AUTOTUNER_H_
