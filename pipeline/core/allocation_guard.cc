#include "pipeline/core/allocation_guard.h"

#include <new>
#include <stdexcept>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace granary {
namespace {

constexpr char kOutOfMemory[] = "out of memory: ";

class AllocationGuardIterator : public Iterator {
 public:
  AllocationGuardIterator(std::unique_ptr<Iterator> input, std::string label)
      : input_(std::move(input)), label_(std::move(label)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    return Guarded([&] { return input_->GetNext(out, end_of_sequence); });
  }
  absl::Status Save(StateWriter& writer) override {
    return Guarded([&] { return input_->Save(writer); });
  }
  absl::Status Restore(const StateReader& reader) override {
    return Guarded([&] { return input_->Restore(reader); });
  }

 private:
  absl::Status Guarded(absl::FunctionRef<absl::Status()> fn) {
    absl::Status status = CatchAllocationFailure(fn);
    // Only what was caught here gets the label: errors from inside already name their op.
    if (absl::IsResourceExhausted(status) && absl::StartsWith(status.message(), kOutOfMemory)) {
      return Annotate(status, label_);
    }
    return status;
  }

  const std::unique_ptr<Iterator> input_;
  const std::string label_;
};

}  // namespace

absl::Status CatchAllocationFailure(absl::FunctionRef<absl::Status()> fn) {
  try {
    return fn();
  } catch (const std::bad_alloc& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat(kOutOfMemory, "an allocation failed (", e.what(), ")"));
  } catch (const std::length_error& e) {
    return absl::ResourceExhaustedError(absl::StrCat(
        kOutOfMemory, "a size beyond what can be allocated (std::length_error: ", e.what(), ")"));
  }
}

std::unique_ptr<Iterator> GuardAllocations(std::unique_ptr<Iterator> it, std::string label) {
  return std::make_unique<AllocationGuardIterator>(std::move(it), std::move(label));
}

}  // namespace granary
