// SplitProvider: where a source iterator gets its splits from.
//
// In-process runs use a fixed plan (PlannedSplitProvider); service workers lease splits from
// the dispatcher, whose journal makes the sequence identical on every replay (DESIGN.md §3).
// Either way the provider's position is part of the iterator state.
#ifndef GRANARY_PIPELINE_CORE_SPLIT_PROVIDER_H_
#define GRANARY_PIPELINE_CORE_SPLIT_PROVIDER_H_

#include <vector>

#include "absl/status/status.h"
#include "pipeline/core/iterator_state.h"
#include "proto/pipeline.pb.h"

namespace granary {

// Thread-compatible.
class SplitProvider {
 public:
  virtual ~SplitProvider() = default;
  // The next split, or *end = true when there are no more.
  virtual absl::Status GetNext(Split* split, bool* end) = 0;
  virtual absl::Status Save(StateWriter& writer) = 0;
  virtual absl::Status Restore(const StateReader& reader) = 0;
};

// Hands out a fixed list of splits in order.
class PlannedSplitProvider : public SplitProvider {
 public:
  explicit PlannedSplitProvider(std::vector<Split> splits) : splits_(std::move(splits)) {}

  absl::Status GetNext(Split* split, bool* end) override;
  absl::Status Save(StateWriter& writer) override;
  absl::Status Restore(const StateReader& reader) override;

 private:
  const std::vector<Split> splits_;
  size_t next_ = 0;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_SPLIT_PROVIDER_H_
