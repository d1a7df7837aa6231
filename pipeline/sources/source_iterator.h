// SourceIterator: the head of every pipeline. Pulls splits from a SplitProvider, reads each
// through its source's SplitReader, and stamps every element with its provenance (split id and
// record index in the file).
//
// State: the provider's position, and for the split being read the split itself, the reader's
// offset and the records read so far — so Restore reopens the split where it left off instead
// of re-reading it. Thread-compatible.
#ifndef GRANARY_PIPELINE_SOURCES_SOURCE_ITERATOR_H_
#define GRANARY_PIPELINE_SOURCES_SOURCE_ITERATOR_H_

#include <memory>

#include "pipeline/core/iterator.h"
#include "pipeline/core/source.h"
#include "pipeline/core/split_provider.h"

namespace granary {

class SourceIterator : public Iterator {
 public:
  // What `context` points to must outlive the iterator.
  SourceIterator(std::shared_ptr<const SourceInfo> info, Params params,
                 const SplitOpenContext& context, std::unique_ptr<SplitProvider> provider);

  absl::Status GetNext(Element* out, bool* end_of_sequence) override;
  absl::Status Save(StateWriter& writer) override;
  absl::Status Restore(const StateReader& reader) override;

 private:
  absl::Status Open(int64_t offset, int64_t records_done);

  const std::shared_ptr<const SourceInfo> info_;
  const Params params_;
  const SplitOpenContext context_;
  const std::unique_ptr<SplitProvider> provider_;
  // The split being read; reader_ is null between splits.
  Split split_;
  std::unique_ptr<SplitReader> reader_;
  int64_t records_done_ = 0;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_SOURCES_SOURCE_ITERATOR_H_
