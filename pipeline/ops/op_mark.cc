// mark(name): passes elements through unchanged. Marks a candidate cache location (DESIGN.md
// §5): the dispatcher may later insert cache_write / cache_read here.
#include "pipeline/ops/builtin_ops.h"
#include "pipeline/spec/op_declarations.h"
#include "pipeline/core/op.h"

namespace granary {
namespace {

class MarkIterator : public UnaryOpIterator {
 public:
  explicit MarkIterator(std::unique_ptr<Iterator> input) : UnaryOpIterator(std::move(input)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    return input_->GetNext(out, end_of_sequence);
  }
  absl::Status Save(StateWriter& writer) override { return SaveInput(writer); }
  absl::Status Restore(const StateReader& reader) override { return RestoreInput(reader); }
};

}  // namespace

OpInfo MarkOp() {
  OpInfo info = MarkOpDeclaration();
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs&) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    return std::make_unique<MarkIterator>(std::move(input));
  };
  return info;
}

}  // namespace granary
