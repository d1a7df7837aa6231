// map(udf): applies a kMap UDF (or a fused chain of them, see op.h) to every element, on the
// calling thread. Stateless beyond its input. Before a batch op it makes each row in (or copies
// it to) its place in the batch (batch_placement.h), sparing the batch op a copy of every row
// its UDFs make in place; output sequence numbers count from the start or the Restore.
#include "common/status_macros.h"
#include "pipeline/ops/builtin_ops.h"
#include "pipeline/spec/op_declarations.h"
#include "pipeline/core/op.h"
#include "pipeline/ops/udf_invoker.h"

namespace granary {
namespace {

class MapIterator : public UnaryOpIterator {
 public:
  MapIterator(std::unique_ptr<Iterator> input, std::vector<OpBuildArgs> chain,
              std::shared_ptr<BatchPlacement> placement)
      : UnaryOpIterator(std::move(input)),
        chain_(std::move(chain)),
        placement_(std::move(placement)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
    if (*end_of_sequence) return absl::OkStatus();
    return InvokeMapUdfsPlaced(chain_, *out, placement_.get(), next_seq_++);
  }
  absl::Status Save(StateWriter& writer) override { return SaveInput(writer); }
  absl::Status Restore(const StateReader& reader) override {
    next_seq_ = 0;
    return RestoreInput(reader);
  }

 private:
  const std::vector<OpBuildArgs> chain_;
  const std::shared_ptr<BatchPlacement> placement_;
  // The output sequence number of the next element (batch_placement.h).
  int64_t next_seq_ = 0;
};

}  // namespace

std::unique_ptr<Iterator> NewMapIterator(std::unique_ptr<Iterator> input,
                                         std::vector<OpBuildArgs> chain,
                                         std::shared_ptr<BatchPlacement> placement) {
  return std::make_unique<MapIterator>(std::move(input), std::move(chain), std::move(placement));
}

OpInfo MapOp() {
  OpInfo info = MapOpDeclaration();
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    return NewMapIterator(std::move(input), {args}, nullptr);
  };
  return info;
}

}  // namespace granary
