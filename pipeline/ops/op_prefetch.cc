// prefetch(buffer_size): a background thread pulls up to `buffer_size` elements ahead of the
// consumer, so the stages before it overlap with those after it.
//
// The producer holds input_mu_ while it pulls an element and stores it, so Save (which takes
// input_mu_ too) sees a quiet input: the buffer, the producer's end/error flags and the input's
// state are mutually consistent. Restore fills the buffer before the producer starts (it starts
// on the first GetNext).
#include <algorithm>
#include <atomic>
#include <deque>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "pipeline/core/autotuner.h"
#include "pipeline/ops/builtin_ops.h"
#include "pipeline/spec/op_declarations.h"
#include "pipeline/core/op.h"

namespace granary {
namespace {

class PrefetchIterator : public UnaryOpIterator, public Autotuner::Knob {
 public:
  // With `tuner`, the buffer's size is its knob (starting at 1).
  PrefetchIterator(std::unique_ptr<Iterator> input, int64_t buffer_size, Autotuner* tuner,
                   const std::string& label)
      : UnaryOpIterator(std::move(input)), buffer_size_(buffer_size) {
    if (tuner != nullptr) tuner->Register(this, Autotuner::KnobKind::kBuffer, label);
  }

  void Set(int value) override {
    absl::MutexLock lock(&mu_);
    buffer_size_ = value;
  }
  int64_t BytesPerUnit() const override { return element_bytes_.load(); }

  ~PrefetchIterator() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (producer_.joinable()) producer_.join();
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    if (!producer_.joinable()) producer_ = std::thread([this] { Produce(); });
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](PrefetchIterator* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
          return !p->buffer_.empty() || p->input_done_ || !p->status_.ok();
        },
        this));
    if (!buffer_.empty()) {
      *out = std::move(buffer_.front());
      buffer_.pop_front();
      *end_of_sequence = false;
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(status_);
    *end_of_sequence = true;
    return absl::OkStatus();
  }

  absl::Status Save(StateWriter& writer) override {
    absl::MutexLock input_lock(&input_mu_);
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(status_);
    writer.WriteElements("buffer", buffer_);
    writer.WriteInt("input_done", input_done_);
    return SaveInput(writer);
  }

  absl::Status Restore(const StateReader& reader) override {
    absl::MutexLock input_lock(&input_mu_);
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(std::vector<Element> buffer, reader.ReadElements("buffer"));
    buffer_.assign(std::make_move_iterator(buffer.begin()), std::make_move_iterator(buffer.end()));
    ASSIGN_OR_RETURN(int64_t input_done, reader.ReadInt("input_done"));
    input_done_ = input_done != 0;
    return RestoreInput(reader);
  }

 private:
  void Produce() {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](PrefetchIterator* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
              return p->stopping_ || p->input_done_ || !p->status_.ok() ||
                     static_cast<int64_t>(p->buffer_.size()) < p->buffer_size_;
            },
            this));
        if (stopping_ || input_done_ || !status_.ok()) return;
      }
      absl::MutexLock input_lock(&input_mu_);
      Element e;
      bool end = false;
      absl::Status status = input_->GetNext(&e, &end);
      absl::MutexLock lock(&mu_);
      if (!status.ok()) {
        status_ = std::move(status);
      } else if (end) {
        input_done_ = true;
      } else {
        element_bytes_.store(static_cast<int64_t>(e.ByteSize()));
        buffer_.push_back(std::move(e));
      }
    }
  }

  int64_t buffer_size_ ABSL_GUARDED_BY(mu_);
  // The bytes of the last element buffered (the tuner's memory budget).
  std::atomic<int64_t> element_bytes_{0};
  // Held by the producer across pulling one input element and storing it; by Save and
  // Restore. Acquired before mu_.
  absl::Mutex input_mu_;
  absl::Mutex mu_ ABSL_ACQUIRED_AFTER(input_mu_);
  std::deque<Element> buffer_ ABSL_GUARDED_BY(mu_);
  bool input_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread producer_;
};

}  // namespace

OpInfo PrefetchOp() {
  OpInfo info = PrefetchOpDeclaration();
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    const int64_t buffer_size = PrefetchBufferSize(args.params);
    Autotuner* tuner = buffer_size == 0 ? args.ctx.autotuner : nullptr;
    return std::make_unique<PrefetchIterator>(std::move(input), std::max<int64_t>(buffer_size, 1),
                                              tuner, args.label);
  };
  return info;
}

}  // namespace granary
