// parallel_map(udf, num_threads): map (or a fused chain of maps, see op.h) on a pool of
// `num_threads` threads, order-preserving.
//
// A runner thread pulls input elements and keeps up to 2 * num_threads of them in flight on
// the pool, independently of the consumer, so the stages before this op keep working while the
// consumer waits; GetNext hands results out strictly in input order.
//
// Save first takes input_mu_ — the runner holds it across pulling one input element and
// scheduling it — so the input is quiet, then waits for the elements in flight to finish and
// saves the finished results, the UDF errors among them (code and message, so that each is
// delivered in its turn after a restore too, as ignore_errors needs) and the input's state. Restore
// refills the results before the runner starts (on the first GetNext).
#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "pipeline/core/autotuner.h"
#include "pipeline/ops/builtin_ops.h"
#include "pipeline/spec/op_declarations.h"
#include "pipeline/core/op.h"
#include "pipeline/ops/udf_invoker.h"

namespace granary {
namespace {

class ParallelMapIterator : public UnaryOpIterator, public Autotuner::Knob {
 public:
  // With `tuner`, the stage runs between 1 and `num_threads` elements at once, as the tuner
  // sets it (starting at 1); without, `num_threads`.
  ParallelMapIterator(std::unique_ptr<Iterator> input, std::vector<OpBuildArgs> chain,
                      int num_threads, std::shared_ptr<BatchPlacement> placement, Autotuner* tuner)
      : UnaryOpIterator(std::move(input)),
        chain_(std::move(chain)),
        tuned_(tuner != nullptr),
        placement_(std::move(placement)),
        parallelism_(num_threads),
        pool_(num_threads) {
    if (tuner != nullptr) {
      tuner->Register(this, Autotuner::KnobKind::kThreads,
                      chain_.empty() ? "parallel_map" : chain_.front().label);
    }
  }

  void Set(int value) override {
    pool_.SetActiveThreads(value);
    absl::MutexLock lock(&mu_);
    parallelism_ = value;
  }
  // Two elements in flight per thread.
  int64_t BytesPerUnit() const override { return 2 * element_bytes_.load(); }

  ~ParallelMapIterator() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (runner_.joinable()) runner_.join();
    // pool_ (the last member) then finishes the UDF calls in flight before anything else goes.
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    if (!runner_.joinable()) runner_ = std::thread([this] { Run(); });
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](ParallelMapIterator* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
          return p->slots_.empty() ? p->input_done_ : p->slots_.front()->done;
        },
        this));
    if (slots_.empty()) {
      RETURN_IF_ERROR(input_status_);
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    std::shared_ptr<Slot> front = std::move(slots_.front());
    slots_.pop_front();
    RETURN_IF_ERROR(front->status);
    *out = std::move(front->element);
    *end_of_sequence = false;
    return absl::OkStatus();
  }

  absl::Status Save(StateWriter& writer) override {
    absl::MutexLock input_lock(&input_mu_);
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](ParallelMapIterator* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
          return std::all_of(p->slots_.begin(), p->slots_.end(),
                             [](const std::shared_ptr<Slot>& s) { return s->done; });
        },
        this));
    std::vector<Element> finished;
    StateWriter failed = writer.Child("failed");
    int64_t num_failed = 0;
    for (const std::shared_ptr<Slot>& slot : slots_) {
      if (!slot->status.ok()) {
        // A UDF's error for this element, delivered in its turn after a restore too.
        StateWriter f = failed.Child(std::to_string(num_failed++));
        f.WriteInt("index", static_cast<int64_t>(finished.size()));
        f.WriteInt("code", static_cast<int64_t>(slot->status.code()));
        f.WriteBytes("message", std::string(slot->status.message()));
      }
      finished.push_back(slot->status.ok() ? slot->element : Element());
    }
    failed.WriteInt("size", num_failed);
    RETURN_IF_ERROR(input_status_);
    writer.WriteElements("finished", finished);
    writer.WriteInt("input_done", input_done_);
    return SaveInput(writer);
  }

  absl::Status Restore(const StateReader& reader) override {
    absl::MutexLock input_lock(&input_mu_);
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(std::vector<Element> finished, reader.ReadElements("finished"));
    slots_.clear();
    for (Element& e : finished) {
      auto slot = std::make_shared<Slot>();
      slot->element = std::move(e);
      slot->done = true;
      slots_.push_back(std::move(slot));
    }
    const StateReader failed = reader.Child("failed");
    int64_t num_failed = 0;  // Absent in states saved before failed elements were.
    if (failed.Contains("size")) {
      ASSIGN_OR_RETURN(num_failed, failed.ReadInt("size"));
    }
    for (int64_t i = 0; i < num_failed; ++i) {
      const StateReader f = failed.Child(std::to_string(i));
      ASSIGN_OR_RETURN(const int64_t index, f.ReadInt("index"));
      ASSIGN_OR_RETURN(const int64_t code, f.ReadInt("code"));
      ASSIGN_OR_RETURN(const std::string message, f.ReadBytes("message"));
      if (index < 0 || index >= static_cast<int64_t>(slots_.size()) || code <= 0 || code > 16) {
        return absl::DataLossError(absl::StrCat("parallel_map state: failed element ", i,
                                                " has index ", index, " and code ", code));
      }
      slots_[index]->status =
          MarkUdfElementError(absl::Status(static_cast<absl::StatusCode>(code), message));
      slots_[index]->element = Element();
    }
    ASSIGN_OR_RETURN(int64_t input_done, reader.ReadInt("input_done"));
    input_done_ = input_done != 0;
    // Output sequence numbers count from the restored position (batch_placement.h).
    next_seq_ = static_cast<int64_t>(slots_.size());
    return RestoreInput(reader);
  }

 private:
  struct Slot {
    Element element;
    absl::Status status;
    bool done = false;  // Guarded by ParallelMapIterator::mu_.
  };

  // The runner: pulls input while fewer than max_in_flight_ elements are in flight.
  void Run() {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](ParallelMapIterator* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
              return p->stopping_ || p->input_done_ ||
                     static_cast<int>(p->slots_.size()) < 2 * p->parallelism_;
            },
            this));
        if (stopping_ || input_done_) return;
      }
      absl::MutexLock input_lock(&input_mu_);
      auto slot = std::make_shared<Slot>();
      bool end = false;
      absl::Status status = input_->GetNext(&slot->element, &end);
      absl::MutexLock lock(&mu_);
      if (!status.ok() || end) {
        input_status_ = std::move(status);
        input_done_ = true;
        continue;
      }
      slots_.push_back(slot);
      pool_.Schedule([this, slot, seq = next_seq_++] {
        absl::Status udf_status =
            InvokeMapUdfsPlaced(chain_, slot->element, placement_.get(), seq);
        if (tuned_ && udf_status.ok()) {
          element_bytes_.store(static_cast<int64_t>(slot->element.ByteSize()));
        }
        absl::MutexLock lock(&mu_);
        slot->status = std::move(udf_status);
        slot->done = true;
      });
    }
  }

  const std::vector<OpBuildArgs> chain_;
  const bool tuned_;
  const std::shared_ptr<BatchPlacement> placement_;
  // The bytes of the last element made (tuned stages only: the tuner's memory budget).
  std::atomic<int64_t> element_bytes_{0};
  // Held by the runner across pulling one input element and scheduling it; by Save and
  // Restore. Acquired before mu_.
  absl::Mutex input_mu_;
  absl::Mutex mu_ ABSL_ACQUIRED_AFTER(input_mu_);
  std::deque<std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  bool input_done_ ABSL_GUARDED_BY(mu_) = false;
  // The input's error, delivered after every element pulled before it.
  absl::Status input_status_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The output sequence number of the next element pulled.
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Up to 2 * parallelism_ elements in flight; a tuned stage's pool has a thread per possible
  // value, parallelism_ of them active.
  int parallelism_ ABSL_GUARDED_BY(mu_);
  std::thread runner_;
  // Last member: destroyed first, finishing its closures while everything above is alive.
  ThreadPool pool_;
};

}  // namespace

std::unique_ptr<Iterator> NewParallelMapIterator(std::unique_ptr<Iterator> input,
                                                 std::vector<OpBuildArgs> chain, int num_threads,
                                                 std::shared_ptr<BatchPlacement> placement,
                                                 Autotuner* tuner) {
  return std::make_unique<ParallelMapIterator>(std::move(input), std::move(chain), num_threads,
                                               std::move(placement), tuner);
}

OpInfo ParallelMapOp() {
  OpInfo info = ParallelMapOpDeclaration();
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    ASSIGN_OR_RETURN(int num_threads, ParallelMapThreads(args.params));
    Autotuner* tuner = num_threads == 0 ? args.ctx.autotuner : nullptr;
    if (tuner != nullptr) num_threads = tuner->max_threads();
    return NewParallelMapIterator(std::move(input), {args}, std::max(num_threads, 1), nullptr,
                                  tuner);
  };
  return info;
}

}  // namespace granary
