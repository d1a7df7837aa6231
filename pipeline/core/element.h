// Element: an ordered list of tensors plus its provenance (DESIGN.md §2). A batch is an element
// whose tensors have a leading batch dimension. Value semantics; thread-compatible.
//
// Its serialized form is the element wire image (transport/element_image.h). An element built
// inside an image — a batch, whose rows are written straight into the image's content regions,
// or an element read from one (a cache chunk's record) — keeps that image in `image`, and
// Serialize() then hands it out as is: serialized by construction, no pass over the bytes. An
// element whose tensors no longer are the image's (replaced by a later op, or copied) is
// serialized anew.
#ifndef GRANARY_PIPELINE_CORE_ELEMENT_H_
#define GRANARY_PIPELINE_CORE_ELEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/core/tensor.h"
#include "proto/pipeline.pb.h"
#include "transport/buffer_pool.h"

namespace granary {

struct Element {
  std::vector<Tensor> tensors;
  // The wire image the numeric tensors are views into, if any (see above).
  BufferRef image;
  // The split the element came from and the record's index within its file (for a batch,
  // those of its first row). Random UDFs key their draws on these (DESIGN.md §2).
  uint64_t split_id = 0;
  int64_t record = 0;

  // "split 3 record 17": how errors name the element at fault.
  std::string Origin() const;
  // A key unique to this element's provenance, for stateless randomness.
  uint64_t ProvenanceKey() const;
  size_t ByteSize() const;

  void ToProto(ElementProto* proto) const;
  static absl::StatusOr<Element> FromProto(const ElementProto& proto);

  // The element's wire image: `image` when the tensors are still its own, else a new image
  // from `pool` (one copy of each tensor's values). ResourceExhausted when no buffer can be had.
  absl::StatusOr<BufferRef> Serialize(BufferPool* pool = BufferPool::Default()) const;
  // Appends the element's wire image to `out`: the bytes Serialize() gives, without a buffer of
  // their own.
  void AppendImage(std::string* out) const;
  // The element an image holds (ParseImage's errors for a malformed one): numeric tensors are
  // views into `image` (which the element keeps), or copies when the image's contents are not
  // aligned for their dtypes (an image another writer made).
  static absl::StatusOr<Element> FromImage(BufferRef image);
  // Whether `image` is set and still holds exactly these tensors and provenance, with every
  // numeric tensor a view into it.
  bool IsImageCurrent() const;

  // Equal tensors and provenance (the image is how they are stored, not what they are).
  friend bool operator==(const Element& a, const Element& b) {
    return a.tensors == b.tensors && a.split_id == b.split_id && a.record == b.record;
  }
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_ELEMENT_H_
