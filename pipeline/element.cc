#include "pipeline/element.h"

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/status_macros.h"

namespace granary {

std::string Element::Origin() const { return absl::StrCat("split ", split_id, " record ", record); }

uint64_t Element::ProvenanceKey() const {
  return HashCombine(split_id, static_cast<uint64_t>(record));
}

size_t Element::ByteSize() const {
  size_t size = 0;
  for (const Tensor& t : tensors) size += t.ByteSize();
  return size;
}

void Element::ToProto(ElementProto* proto) const {
  proto->Clear();
  for (const Tensor& t : tensors) t.ToProto(proto->add_tensors());
  proto->set_split_id(split_id);
  proto->set_record(record);
}

absl::StatusOr<Element> Element::FromProto(const ElementProto& proto) {
  Element element;
  element.split_id = proto.split_id();
  element.record = proto.record();
  element.tensors.reserve(proto.tensors_size());
  for (const TensorProto& t : proto.tensors()) {
    ASSIGN_OR_RETURN(Tensor tensor, Tensor::FromProto(t));
    element.tensors.push_back(std::move(tensor));
  }
  return element;
}

}  // namespace granary
