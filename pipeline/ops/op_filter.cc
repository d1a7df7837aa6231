// filter(udf): keeps the elements for which a kPredicate UDF returns true.
#include "common/status_macros.h"
#include "pipeline/ops/builtin_ops.h"
#include "pipeline/spec/op_declarations.h"
#include "pipeline/core/op.h"
#include "pipeline/ops/udf_invoker.h"

namespace granary {
namespace {

class FilterIterator : public UnaryOpIterator {
 public:
  FilterIterator(std::unique_ptr<Iterator> input, OpBuildArgs args)
      : UnaryOpIterator(std::move(input)), args_(std::move(args)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (true) {
      RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
      if (*end_of_sequence) return absl::OkStatus();
      ASSIGN_OR_RETURN(bool keep, InvokePredicateUdf(args_, *out));
      if (keep) return absl::OkStatus();
    }
  }
  absl::Status Save(StateWriter& writer) override { return SaveInput(writer); }
  absl::Status Restore(const StateReader& reader) override { return RestoreInput(reader); }

 private:
  const OpBuildArgs args_;
};

}  // namespace

OpInfo FilterOp() {
  OpInfo info = FilterOpDeclaration();
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    return std::make_unique<FilterIterator>(std::move(input), args);
  };
  return info;
}

}  // namespace granary
