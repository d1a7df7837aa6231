// cache_write: passes elements through unchanged and hands each, numbered, to the task's
// CacheSink (DESIGN.md §5). Inserted by the dispatcher into the pipelines of cache-writing
// epochs (cache/cache_policy.h); never written by users.
#include "absl/strings/str_cat.h"
#include "cache/cache_ops.h"
#include "cache/cache_sink.h"
#include "common/status_macros.h"
#include "pipeline/core/op.h"

namespace granary {
namespace {

class CacheWriteIterator : public UnaryOpIterator {
 public:
  CacheWriteIterator(std::unique_ptr<Iterator> input, CacheSink* sink, std::string label)
      : UnaryOpIterator(std::move(input)), sink_(sink), label_(std::move(label)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
    if (*end_of_sequence) return absl::OkStatus();
    RETURN_IF_ERROR(Annotate(sink_->Append(next_index_, *out),
                             absl::StrCat(label_, ": element ", next_index_)));
    ++next_index_;
    return absl::OkStatus();
  }

  absl::Status Save(StateWriter& writer) override {
    RETURN_IF_ERROR(SaveInput(writer));
    writer.WriteInt("next_index", next_index_);
    StateWriter sink = writer.Child("sink");
    return Annotate(sink_->Save(sink), label_);
  }

  absl::Status Restore(const StateReader& reader) override {
    RETURN_IF_ERROR(RestoreInput(reader));
    ASSIGN_OR_RETURN(next_index_, reader.ReadInt("next_index"));
    return Annotate(sink_->Restore(reader.Child("sink")), label_);
  }

 private:
  CacheSink* const sink_;
  const std::string label_;
  int64_t next_index_ = 0;
};

}  // namespace

OpInfo CacheWriteOp() {
  OpInfo info = CacheWriteOpDeclaration();
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    CacheSink* const sink = args.ctx.resources.Get<CacheSink>();
    if (sink == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          args.label, ": runs only in a cache-writing task of the service (no cache sink)"));
    }
    return std::make_unique<CacheWriteIterator>(std::move(input), sink, args.label);
  };
  return info;
}

}  // namespace granary
