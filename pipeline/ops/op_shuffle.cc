// shuffle(buffer_size, seed): a uniform random pick from a buffer of up to `buffer_size`
// elements, refilled from the input. Draws come from a counter-based generator keyed by
// (job seed, op seed, epoch, op index), so the state is just the buffer, the draw counter and
// whether the input is exhausted.
#include "common/stateless_random.h"
#include "common/status_macros.h"
#include "pipeline/ops/builtin_ops.h"
#include "pipeline/spec/op_declarations.h"
#include "pipeline/core/op.h"

namespace granary {
namespace {

class ShuffleIterator : public UnaryOpIterator {
 public:
  ShuffleIterator(std::unique_ptr<Iterator> input, int64_t buffer_size, uint64_t key)
      : UnaryOpIterator(std::move(input)), buffer_size_(buffer_size), key_(key), rng_(key) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (!input_done_ && static_cast<int64_t>(buffer_.size()) < buffer_size_) {
      Element e;
      bool end = false;
      RETURN_IF_ERROR(input_->GetNext(&e, &end));
      if (end) {
        input_done_ = true;
      } else {
        buffer_.push_back(std::move(e));
      }
    }
    if (buffer_.empty()) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    const size_t pick = rng_.Uniform(buffer_.size());
    *out = std::move(buffer_[pick]);
    if (pick + 1 != buffer_.size()) buffer_[pick] = std::move(buffer_.back());
    buffer_.pop_back();
    *end_of_sequence = false;
    return absl::OkStatus();
  }

  absl::Status Save(StateWriter& writer) override {
    writer.WriteElements("buffer", buffer_);
    writer.WriteInt("draws", static_cast<int64_t>(rng_.counter()));
    writer.WriteInt("input_done", input_done_);
    return SaveInput(writer);
  }

  absl::Status Restore(const StateReader& reader) override {
    ASSIGN_OR_RETURN(buffer_, reader.ReadElements("buffer"));
    ASSIGN_OR_RETURN(int64_t draws, reader.ReadInt("draws"));
    rng_ = StatelessRandom(key_, static_cast<uint64_t>(draws));
    ASSIGN_OR_RETURN(int64_t input_done, reader.ReadInt("input_done"));
    input_done_ = input_done != 0;
    return RestoreInput(reader);
  }

 private:
  const int64_t buffer_size_;
  const uint64_t key_;
  StatelessRandom rng_;
  std::vector<Element> buffer_;
  bool input_done_ = false;
};

}  // namespace

OpInfo ShuffleOp() {
  OpInfo info = ShuffleOpDeclaration();
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    const int64_t buffer_size = args.params.GetInt("buffer_size");
    const uint64_t key = RandomKey(args.ctx.seed, static_cast<uint64_t>(args.ctx.epoch),
                                   static_cast<uint64_t>(args.params.GetInt("seed")),
                                   static_cast<uint64_t>(args.op_index));
    return std::make_unique<ShuffleIterator>(std::move(input), buffer_size, key);
  };
  return info;
}

}  // namespace granary
