// take(count): the first `count` elements of its input, then end of sequence.
#include "common/status_macros.h"
#include "pipeline/ops/builtin_ops.h"
#include "pipeline/spec/op_declarations.h"
#include "pipeline/core/op.h"

namespace granary {
namespace {

class TakeIterator : public UnaryOpIterator {
 public:
  TakeIterator(std::unique_ptr<Iterator> input, int64_t count)
      : UnaryOpIterator(std::move(input)), count_(count) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    if (taken_ >= count_) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
    if (!*end_of_sequence) ++taken_;
    return absl::OkStatus();
  }
  absl::Status Save(StateWriter& writer) override {
    writer.WriteInt("taken", taken_);
    return SaveInput(writer);
  }
  absl::Status Restore(const StateReader& reader) override {
    ASSIGN_OR_RETURN(taken_, reader.ReadInt("taken"));
    return RestoreInput(reader);
  }

 private:
  const int64_t count_;
  int64_t taken_ = 0;
};

}  // namespace

OpInfo TakeOp() {
  OpInfo info = TakeOpDeclaration();
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    const int64_t count = args.params.GetInt("count");
    return std::make_unique<TakeIterator>(std::move(input), count);
  };
  return info;
}

}  // namespace granary
