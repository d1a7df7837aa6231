// skip(count): drops the first `count` elements of its input.
#include "common/status_macros.h"
#include "pipeline/ops/builtin_ops.h"
#include "pipeline/spec/op_declarations.h"
#include "pipeline/core/op.h"

namespace granary {
namespace {

class SkipIterator : public UnaryOpIterator {
 public:
  SkipIterator(std::unique_ptr<Iterator> input, int64_t count)
      : UnaryOpIterator(std::move(input)), count_(count) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (skipped_ < count_) {
      RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
      if (*end_of_sequence) return absl::OkStatus();
      ++skipped_;
    }
    return input_->GetNext(out, end_of_sequence);
  }
  absl::Status Save(StateWriter& writer) override {
    writer.WriteInt("skipped", skipped_);
    return SaveInput(writer);
  }
  absl::Status Restore(const StateReader& reader) override {
    ASSIGN_OR_RETURN(skipped_, reader.ReadInt("skipped"));
    return RestoreInput(reader);
  }

 private:
  const int64_t count_;
  int64_t skipped_ = 0;
};

}  // namespace

OpInfo SkipOp() {
  OpInfo info = SkipOpDeclaration();
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    const int64_t count = args.params.GetInt("count");
    return std::make_unique<SkipIterator>(std::move(input), count);
  };
  return info;
}

}  // namespace granary
