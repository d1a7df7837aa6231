#include "pipeline/core/element.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "transport/element_image.h"

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

bool Element::IsImageCurrent() const {
  if (image == nullptr) return false;
  absl::StatusOr<ImageView> view = ParseImage(image->bytes());
  if (!view.ok() || view->split_id != split_id || view->record != record ||
      view->tensors.size() != tensors.size()) {
    return false;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    const TensorView& v = view->tensors[i];
    if (t.dtype() != v.dtype || t.shape() != v.shape) return false;
    if (t.dtype() == DT_STRING) {
      if (!std::equal(t.strings().begin(), t.strings().end(), v.strings.begin())) return false;
    } else if (t.content().data() != v.data && !t.content().empty()) {
      return false;
    }
  }
  return true;
}

namespace {

ImageLayout LayoutOf(const Element& element) {
  std::vector<ImageTensorSpec> specs(element.tensors.size());
  for (size_t i = 0; i < element.tensors.size(); ++i) {
    const Tensor& t = element.tensors[i];
    specs[i] = {t.dtype(), t.shape(), &t.strings()};
  }
  return ImageLayout(specs, element.split_id, element.record);
}

// Writes `element`'s image, laid out as `layout`, into `out` (layout.size() bytes).
void WriteImage(const Element& element, const ImageLayout& layout, char* out) {
  layout.WriteFraming(out);
  for (size_t i = 0; i < element.tensors.size(); ++i) {
    const absl::string_view content = element.tensors[i].content();
    if (!content.empty()) std::memcpy(out + layout.content_offset(i), content.data(), content.size());
  }
}

}  // namespace

absl::StatusOr<BufferRef> Element::Serialize(BufferPool* pool) const {
  if (IsImageCurrent()) return image;
  const ImageLayout layout = LayoutOf(*this);
  ASSIGN_OR_RETURN(BufferRef out, pool->Allocate(layout.size()));
  WriteImage(*this, layout, out->data());
  return out;
}

void Element::AppendImage(std::string* out) const {
  if (IsImageCurrent()) {
    out->append(image->data(), image->size());
    return;
  }
  const ImageLayout layout = LayoutOf(*this);
  const size_t at = out->size();
  out->resize(at + layout.size());
  WriteImage(*this, layout, out->data() + at);
}

absl::StatusOr<Element> Element::FromImage(BufferRef image) {
  ASSIGN_OR_RETURN(ImageView view, ParseImage(image->bytes()));
  const bool aligned = ContentsAligned(view);
  Element element;
  element.split_id = view.split_id;
  element.record = view.record;
  element.tensors.reserve(view.tensors.size());
  for (TensorView& v : view.tensors) {
    if (v.dtype == DT_STRING) {
      element.tensors.push_back(Tensor::Strings(
          std::move(v.shape), std::vector<std::string>(v.strings.begin(), v.strings.end())));
    } else if (aligned) {
      // The element owns the image: an op changing a view in place changes the image with
      // it, which keeps the image current.
      element.tensors.push_back(
          Tensor::View(v.dtype, std::move(v.shape), const_cast<char*>(v.data), image));
    } else {
      Tensor copy = Tensor::Uninitialized(v.dtype, std::move(v.shape));
      std::memcpy(copy.mutable_bytes(), v.data, v.size);
      element.tensors.push_back(std::move(copy));
    }
  }
  if (aligned) element.image = std::move(image);
  return element;
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
