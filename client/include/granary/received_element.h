// ReceivedElement: one element as the trainer receives it — its tensors as views (dtype, shape,
// pointer, length; transport/tensor_view.h) into the bytes the element arrived in: the buffer
// the client received it into, or the shared-memory segment of a worker on the trainer's host.
// No tensor is copied out; the element owns a reference to those bytes, so every view stays
// valid for as long as the element, or any copy of it, is alive — after the reader that made
// it, its worker and its connection are gone.
//
// Numeric values are little-endian, row-major and 64-byte aligned. Copies share the bytes
// (copying an element copies a reference and the views, never the values). The bytes are this
// process's own — a shared-memory segment is mapped copy-on-write — so a caller may write into
// them (the Python binding's arrays are writable): nothing else reads them after delivery, and
// no write reaches a worker. Thread-compatible.
#ifndef GRANARY_CLIENT_INCLUDE_GRANARY_RECEIVED_ELEMENT_H_
#define GRANARY_CLIENT_INCLUDE_GRANARY_RECEIVED_ELEMENT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/pipeline.pb.h"
#include "transport/tensor_view.h"

namespace granary {

class ReceivedElement {
 public:
  ReceivedElement() = default;

  // Views the element wire image `image` (a serialized ElementProto, transport/FORMAT.md),
  // which `owner` keeps alive. InvalidArgument or DataLoss naming what is wrong with it.
  static absl::StatusOr<ReceivedElement> View(std::shared_ptr<const void> owner,
                                              absl::string_view image);

  const std::vector<TensorView>& tensors() const { return tensors_; }
  // REQUIRES: i < tensors().size().
  const TensorView& tensor(size_t i) const { return tensors_[i]; }
  // The split and record the element (a batch: its first row) came from.
  uint64_t split_id() const { return split_id_; }
  int64_t record() const { return record_; }
  // The element's wire image.
  absl::string_view bytes() const { return bytes_; }
  // A copy as an ElementProto (for code written against it; the views cost nothing).
  ElementProto ToProto() const;
  // Equal shares under REMAINDER_PAD: a copy of an element the consumer already delivered,
  // handed out so that every consumer takes as many steps; a trainer may mask it.
  bool padding() const { return padding_; }
  // This element (sharing its bytes) marked as padding.
  ReceivedElement AsPadding() const {
    ReceivedElement copy = *this;
    copy.padding_ = true;
    return copy;
  }

 private:
  std::shared_ptr<const void> owner_;
  absl::string_view bytes_;
  std::vector<TensorView> tensors_;
  uint64_t split_id_ = 0;
  int64_t record_ = 0;
  bool padding_ = false;
};

}  // namespace granary

#endif  // GRANARY_CLIENT_INCLUDE_GRANARY_RECEIVED_ELEMENT_H_
