#include "transport/element_image.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "transport/wire_format.h"

namespace granary {
namespace {

using wire::AppendVarint;
using wire::kFixed32;
using wire::kFixed64;
using wire::kLengthDelimited;
using wire::kVarint;
using wire::Tag;
using wire::VarintSize;

// The fields an image holds (proto/pipeline.proto).
constexpr int kElementTensors = 1, kElementSplitId = 2, kElementRecord = 3;
constexpr int kTensorDtype = 1, kTensorShape = 2, kTensorContent = 3, kTensorStrings = 4,
              kTensorPadding = 5;

void AppendLengthField(int field, absl::string_view bytes, std::string* out) {
  out->push_back(Tag(field, kLengthDelimited));
  AppendVarint(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}

// A cursor over protobuf wire bytes; every read checks bounds.
class WireReader {
 public:
  WireReader(absl::string_view bytes, size_t base) : bytes_(bytes), base_(base) {}
  bool done() const { return pos_ >= bytes_.size(); }
  size_t offset() const { return base_ + pos_; }

  absl::Status Varint(uint64_t* value) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ >= bytes_.size()) return Malformed("truncated varint");
      const uint8_t byte = static_cast<uint8_t>(bytes_[pos_++]);
      if (shift < 64) result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *value = result;
        return absl::OkStatus();
      }
    }
    return Malformed("varint longer than 10 bytes");
  }
  // A field's tag: its number and wire type.
  absl::Status Tag(int* field, int* wire_type) {
    uint64_t tag = 0;
    if (absl::Status s = Varint(&tag); !s.ok()) return s;
    *field = static_cast<int>(tag >> 3);
    *wire_type = static_cast<int>(tag & 7);
    return absl::OkStatus();
  }
  absl::Status Bytes(absl::string_view* out) {
    uint64_t length;
    if (absl::Status s = Varint(&length); !s.ok()) return s;
    if (length > bytes_.size() - pos_) {
      return Malformed(absl::StrCat("length ", length, " runs past the end (", bytes_.size() - pos_,
                                    " bytes left)"));
    }
    *out = bytes_.substr(pos_, length);
    pos_ += length;
    return absl::OkStatus();
  }
  absl::Status Skip(int wire_type) {
    uint64_t ignored;
    absl::string_view bytes;
    switch (wire_type) {
      case kVarint:
        return Varint(&ignored);
      case kLengthDelimited:
        return Bytes(&bytes);
      case kFixed64:
      case kFixed32: {
        const size_t width = wire_type == kFixed64 ? 8 : 4;
        if (width > bytes_.size() - pos_) return Malformed("truncated fixed-width field");
        pos_ += width;
        return absl::OkStatus();
      }
      default:
        return Malformed(absl::StrCat("unsupported wire type ", wire_type));
    }
  }
  absl::Status Malformed(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat("element image: ", what, " at byte ", base_ + pos_));
  }

 private:
  absl::string_view bytes_;
  size_t base_;
  size_t pos_ = 0;
};

absl::Status ParseShape(absl::string_view packed, size_t base, std::vector<int64_t>* shape) {
  WireReader reader(packed, base);
  while (!reader.done()) {
    uint64_t d = 0;
    if (absl::Status s = reader.Varint(&d); !s.ok()) return s;
    shape->push_back(static_cast<int64_t>(d));
  }
  return absl::OkStatus();
}

absl::Status ParseTensor(absl::string_view bytes, size_t base, size_t index, TensorView* t) {
  WireReader reader(bytes, base);
  uint64_t dtype = 0;
  while (!reader.done()) {
    int field, wire_type;
    if (absl::Status s = reader.Tag(&field, &wire_type); !s.ok()) return s;
    absl::Status s;
    absl::string_view value;
    const size_t at = reader.offset();
    if (field == kTensorDtype && wire_type == kVarint) {
      s = reader.Varint(&dtype);
    } else if (field == kTensorShape && wire_type == kLengthDelimited) {
      s = reader.Bytes(&value);
      // The packed values start after the length prefix: their offset only names errors.
      if (s.ok()) s = ParseShape(value, at, &t->shape);
    } else if (field == kTensorShape && wire_type == kVarint) {
      uint64_t d = 0;
      s = reader.Varint(&d);
      t->shape.push_back(static_cast<int64_t>(d));
    } else if (field == kTensorContent && wire_type == kLengthDelimited) {
      s = reader.Bytes(&value);
      t->data = value.data();
      t->size = value.size();
    } else if (field == kTensorStrings && wire_type == kLengthDelimited) {
      s = reader.Bytes(&value);
      t->strings.push_back(value);
    } else {
      s = reader.Skip(wire_type);  // alignment_padding, and fields of later versions
    }
    if (!s.ok()) return s;
  }
  const auto invalid = [index, t](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("element image: tensor ", index, " (",
                                                   DataType_Name(t->dtype), "[",
                                                   absl::StrJoin(t->shape, ","), "]): ", what));
  };
  if (dtype == DT_INVALID || dtype > static_cast<uint64_t>(DataType_MAX) ||
      !DataType_IsValid(static_cast<int>(dtype))) {
    return absl::InvalidArgumentError(
        absl::StrCat("element image: tensor ", index, " has invalid dtype ", dtype));
  }
  t->dtype = static_cast<DataType>(dtype);
  uint64_t elements = 1;
  for (int64_t d : t->shape) {
    if (d < 0) return invalid(absl::StrCat("negative dimension ", d));
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements) ||
        elements > (uint64_t{1} << 62)) {
      return invalid("more elements than any buffer holds");
    }
  }
  // A field the dtype does not use (content of a string tensor, string values of a numeric one)
  // carries nothing: dropped, as Tensor::FromProto ignores it (found by element_image_fuzzer:
  // the aligned rewrite of such an image differed).
  if (t->dtype == DT_STRING) {
    if (t->strings.size() != elements) {
      return invalid(absl::StrCat(t->strings.size(), " string values"));
    }
    t->data = nullptr;
    t->size = 0;
  } else {
    if (t->size != elements * DtypeSize(t->dtype)) {
      return invalid(absl::StrCat(t->size, " content bytes"));
    }
    t->strings.clear();
  }
  return absl::OkStatus();
}

}  // namespace

size_t DtypeSize(DataType dtype) {
  switch (dtype) {
    case DT_UINT8:
    case DT_BOOL:
      return 1;
    case DT_INT32:
    case DT_FLOAT:
      return 4;
    case DT_INT64:
    case DT_DOUBLE:
      return 8;
    default:
      return 0;
  }
}

ImageLayout::ImageLayout(const std::vector<ImageTensorSpec>& tensors, uint64_t split_id,
                         int64_t record) {
  size_t pos = 0;
  tensors_.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ImageTensorSpec& spec = tensors[i];
    Laid& laid = tensors_[i];
    // The TensorProto's fields before its content, in protobuf's field order.
    std::string header;
    header.push_back(Tag(kTensorDtype, kVarint));
    AppendVarint(spec.dtype, &header);
    if (!spec.shape.empty()) {
      std::string packed;
      for (int64_t d : spec.shape) AppendVarint(static_cast<uint64_t>(d), &packed);
      AppendLengthField(kTensorShape, packed, &header);
    }
    uint64_t elements = 1;
    for (int64_t d : spec.shape) elements *= static_cast<uint64_t>(d);
    if (spec.dtype == DT_STRING) {
      for (const std::string& s : *spec.strings) AppendLengthField(kTensorStrings, s, &header);
    } else {
      laid.content_size = elements * DtypeSize(spec.dtype);
    }
    laid.framing_offset = pos;
    if (laid.content_size == 0) {
      laid.framing.push_back(Tag(kElementTensors, kLengthDelimited));
      AppendVarint(header.size(), &laid.framing);
      laid.framing += header;
      laid.content_offset = pos + laid.framing.size();
      pos += laid.framing.size();
      continue;
    }
    // alignment_padding (tag, one-byte length, `pad` zeros), then content's tag and length:
    // the smallest pad that puts the content at a multiple of kImageAlignment. The tensor's own
    // length prefix grows with pad, so it is recomputed for each candidate; a pad below 128
    // always exists (see transport/FORMAT.md).
    const size_t content_prefix = 1 + VarintSize(laid.content_size);
    size_t pad = 0;
    size_t body = 0;
    for (; pad < 128; ++pad) {
      body = header.size() + 2 + pad + content_prefix + laid.content_size;
      const size_t content_at = pos + 1 + VarintSize(body) + header.size() + 2 + pad +
                                content_prefix;
      if (content_at % kImageAlignment == 0) break;
    }
    laid.framing.push_back(Tag(kElementTensors, kLengthDelimited));
    AppendVarint(body, &laid.framing);
    laid.framing += header;
    laid.framing.push_back(Tag(kTensorPadding, kLengthDelimited));
    laid.framing.push_back(static_cast<char>(pad));
    laid.framing.append(pad, '\0');
    laid.framing.push_back(Tag(kTensorContent, kLengthDelimited));
    AppendVarint(laid.content_size, &laid.framing);
    laid.content_offset = pos + laid.framing.size();
    pos = laid.content_offset + laid.content_size;
  }
  if (split_id != 0) {
    trailer_.push_back(Tag(kElementSplitId, kVarint));
    AppendVarint(split_id, &trailer_);
  }
  if (record != 0) {
    trailer_.push_back(Tag(kElementRecord, kVarint));
    AppendVarint(static_cast<uint64_t>(record), &trailer_);
  }
  size_ = pos + trailer_.size();
}

void ImageLayout::WriteFraming(char* out) const {
  for (const Laid& laid : tensors_) {
    std::memcpy(out + laid.framing_offset, laid.framing.data(), laid.framing.size());
  }
  std::memcpy(out + size_ - trailer_.size(), trailer_.data(), trailer_.size());
}

absl::StatusOr<ImageView> ParseImage(absl::string_view image) {
  ImageView view;
  WireReader reader(image, 0);
  while (!reader.done()) {
    int field, wire_type;
    if (absl::Status s = reader.Tag(&field, &wire_type); !s.ok()) return s;
    absl::Status s;
    if (field == kElementTensors && wire_type == kLengthDelimited) {
      absl::string_view bytes;
      s = reader.Bytes(&bytes);
      if (s.ok()) {
        view.tensors.emplace_back();
        s = ParseTensor(bytes, static_cast<size_t>(bytes.data() - image.data()),
                        view.tensors.size() - 1, &view.tensors.back());
      }
    } else if (field == kElementSplitId && wire_type == kVarint) {
      s = reader.Varint(&view.split_id);
    } else if (field == kElementRecord && wire_type == kVarint) {
      uint64_t record;
      s = reader.Varint(&record);
      view.record = static_cast<int64_t>(record);
    } else {
      s = reader.Skip(wire_type);
    }
    if (!s.ok()) return s;
  }
  return view;
}

absl::StatusOr<BufferRef> WriteAlignedImage(const ImageView& view, BufferPool* pool) {
  std::vector<std::vector<std::string>> strings(view.tensors.size());
  std::vector<ImageTensorSpec> specs(view.tensors.size());
  for (size_t i = 0; i < view.tensors.size(); ++i) {
    const TensorView& t = view.tensors[i];
    for (absl::string_view value : t.strings) strings[i].emplace_back(value);
    specs[i] = {t.dtype, t.shape, &strings[i]};
  }
  const ImageLayout layout(specs, view.split_id, view.record);
  absl::StatusOr<BufferRef> out = pool->Allocate(layout.size());
  if (!out.ok()) return out.status();
  layout.WriteFraming((*out)->data());
  for (size_t i = 0; i < view.tensors.size(); ++i) {
    if (view.tensors[i].size > 0) {
      std::memcpy((*out)->data() + layout.content_offset(i), view.tensors[i].data,
                  view.tensors[i].size);
    }
  }
  return out;
}

bool ContentsAligned(const ImageView& view) {
  for (const TensorView& t : view.tensors) {
    const size_t width = DtypeSize(t.dtype);
    if (width > 1 && reinterpret_cast<uintptr_t>(t.data) % width != 0) return false;
  }
  return true;
}

}  // namespace granary
