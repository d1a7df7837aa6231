// ignore_errors: drops the elements for which the UDF of the op before it (map, parallel_map or
// filter, which Pipeline::Create checks) failed with DataLoss or InvalidArgument — a damaged or
// malformed record — as tf.data's ignore_errors does, and counts them in
// IteratorStats::skipped_elements. Every other error passes on: those of other codes
// (ResourceExhausted, Unavailable, ...), and errors that are not a UDF's for one element (a
// corrupt file in the source, which no retry gets past).
//
// Deterministic: a UDF fails for the same elements wherever they are computed. State: the count
// of elements dropped so far, and the input's.
#include "common/status_macros.h"
#include "pipeline/ops/builtin_ops.h"
#include "pipeline/spec/op_declarations.h"
#include "pipeline/core/op.h"
#include "pipeline/ops/udf_invoker.h"

namespace granary {
namespace {

class IgnoreErrorsIterator : public UnaryOpIterator {
 public:
  IgnoreErrorsIterator(std::unique_ptr<Iterator> input, IteratorStats* stats)
      : UnaryOpIterator(std::move(input)), stats_(stats) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (true) {
      const absl::Status status = input_->GetNext(out, end_of_sequence);
      if (status.ok()) return status;
      if (!IsUdfElementError(status) ||
          (!absl::IsDataLoss(status) && !absl::IsInvalidArgument(status))) {
        return status;
      }
      Count(1);
    }
  }

  absl::Status Save(StateWriter& writer) override {
    writer.WriteInt("skipped", skipped_);
    return SaveInput(writer);
  }

  absl::Status Restore(const StateReader& reader) override {
    ASSIGN_OR_RETURN(const int64_t skipped, reader.ReadInt("skipped"));
    Count(skipped);
    return RestoreInput(reader);
  }

 private:
  void Count(int64_t n) {
    skipped_ += n;
    if (stats_ != nullptr) stats_->skipped_elements.fetch_add(n, std::memory_order_relaxed);
  }

  IteratorStats* const stats_;
  int64_t skipped_ = 0;
};

}  // namespace

OpInfo IgnoreErrorsOp() {
  OpInfo info = IgnoreErrorsOpDeclaration();
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    return std::make_unique<IgnoreErrorsIterator>(std::move(input), args.ctx.stats);
  };
  return info;
}

}  // namespace granary
