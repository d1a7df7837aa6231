// map(udf): applies a kMap UDF (or a fused chain of them, see op.h) to every element, on the
// calling thread. Stateless beyond its input.
#include "common/status_macros.h"
#include "pipeline/ops/builtin_ops.h"
#include "pipeline/spec/op_declarations.h"
#include "pipeline/core/op.h"
#include "pipeline/ops/udf_invoker.h"

namespace granary {
namespace {

class MapIterator : public UnaryOpIterator {
 public:
  MapIterator(std::unique_ptr<Iterator> input, std::vector<OpBuildArgs> chain)
      : UnaryOpIterator(std::move(input)), chain_(std::move(chain)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
    if (*end_of_sequence) return absl::OkStatus();
    return InvokeMapUdfs(chain_, *out);
  }
  absl::Status Save(StateWriter& writer) override { return SaveInput(writer); }
  absl::Status Restore(const StateReader& reader) override { return RestoreInput(reader); }

 private:
  const std::vector<OpBuildArgs> chain_;
};

}  // namespace

std::unique_ptr<Iterator> NewMapIterator(std::unique_ptr<Iterator> input,
                                         std::vector<OpBuildArgs> chain) {
  return std::make_unique<MapIterator>(std::move(input), std::move(chain));
}

OpInfo MapOp() {
  OpInfo info = MapOpDeclaration();
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    return NewMapIterator(std::move(input), {args});
  };
  return info;
}

}  // namespace granary
