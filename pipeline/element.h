// Element: an ordered list of tensors plus its provenance (DESIGN.md §2). A batch is an element
// whose tensors have a leading batch dimension. Value semantics; thread-compatible.
#ifndef GRANARY_PIPELINE_ELEMENT_H_
#define GRANARY_PIPELINE_ELEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/tensor.h"
#include "proto/pipeline.pb.h"

namespace granary {

struct Element {
  std::vector<Tensor> tensors;
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
  // The serialized ElementProto — the same bytes as ToProto then SerializeAsString — written in
  // one pass: numeric tensor contents are copied once, straight into the result, instead of
  // into a proto and then again into its serialization (the worker does this per element).
  std::string SerializeAsProto() const;

  friend bool operator==(const Element& a, const Element& b) {
    return a.tensors == b.tensors && a.split_id == b.split_id && a.record == b.record;
  }
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_ELEMENT_H_
