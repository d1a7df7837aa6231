#include "granary/received_element.h"

#include <utility>

#include "transport/element_image.h"

namespace granary {

absl::StatusOr<ReceivedElement> ReceivedElement::View(std::shared_ptr<const void> owner,
                                                      absl::string_view image) {
  absl::StatusOr<ImageView> view = ParseImage(image);
  if (!view.ok()) return view.status();
  ReceivedElement element;
  element.owner_ = std::move(owner);
  element.bytes_ = image;
  element.tensors_ = std::move(view->tensors);
  element.split_id_ = view->split_id;
  element.record_ = view->record;
  return element;
}

ElementProto ReceivedElement::ToProto() const {
  ElementProto proto;
  for (const TensorView& view : tensors_) {
    TensorProto* t = proto.add_tensors();
    t->set_dtype(view.dtype);
    t->mutable_shape()->Assign(view.shape.begin(), view.shape.end());
    if (view.dtype == DT_STRING) {
      for (absl::string_view s : view.strings) t->add_string_values(s.data(), s.size());
    } else {
      t->set_content(view.data, view.size);
    }
  }
  proto.set_split_id(split_id_);
  proto.set_record(record_);
  return proto;
}

}  // namespace granary
