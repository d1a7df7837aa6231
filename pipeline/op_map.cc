// map(udf): applies a kMap UDF to every element, on the calling thread. Stateless beyond its
// input.
#include "common/status_macros.h"
#include "pipeline/op.h"
#include "pipeline/udf_invoker.h"

namespace granary {
namespace {

class MapIterator : public UnaryOpIterator {
 public:
  MapIterator(std::unique_ptr<Iterator> input, OpBuildArgs args)
      : UnaryOpIterator(std::move(input)), args_(std::move(args)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
    if (*end_of_sequence) return absl::OkStatus();
    return InvokeMapUdf(args_, *out);
  }
  absl::Status Save(StateWriter& writer) override { return SaveInput(writer); }
  absl::Status Restore(const StateReader& reader) override { return RestoreInput(reader); }

 private:
  const OpBuildArgs args_;
};

}  // namespace

OpInfo MapOp() {
  OpInfo info;
  info.name = "map";
  info.takes_udf = true;
  info.udf_kind = UdfKind::kMap;
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    return std::make_unique<MapIterator>(std::move(input), args);
  };
  return info;
}

}  // namespace granary
