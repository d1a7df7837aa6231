#include "pipeline/tensor.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace granary {

size_t DataTypeSize(DataType dtype) {
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

absl::string_view DataTypeName(DataType dtype) {
  switch (dtype) {
    case DT_UINT8:
      return "uint8";
    case DT_INT32:
      return "int32";
    case DT_INT64:
      return "int64";
    case DT_FLOAT:
      return "float32";
    case DT_DOUBLE:
      return "float64";
    case DT_BOOL:
      return "bool";
    case DT_STRING:
      return "string";
    default:
      return "invalid";
  }
}

absl::StatusOr<DataType> DataTypeFromName(absl::string_view name) {
  for (DataType dtype : {DT_UINT8, DT_INT32, DT_INT64, DT_FLOAT, DT_DOUBLE, DT_BOOL, DT_STRING}) {
    if (DataTypeName(dtype) == name) return dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype '", name, "' (known: uint8, int32, int64, float32, float64, bool, string)"));
}

namespace {

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

Tensor::Tensor(DataType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)), num_elements_(NumElements(shape_)) {
  if (dtype_ == DT_STRING) {
    strings_.resize(num_elements_);
  } else {
    content_size_ = num_elements_ * DataTypeSize(dtype_);
    content_.reset(new char[content_size_]());
  }
}

Tensor Tensor::Uninitialized(DataType dtype, std::vector<int64_t> shape) {
  if (dtype == DT_STRING) return Tensor(dtype, std::move(shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.num_elements_ = NumElements(t.shape_);
  t.content_size_ = t.num_elements_ * DataTypeSize(dtype);
  t.content_.reset(new char[t.content_size_]);
  return t;
}

Tensor::Tensor(const Tensor& other)
    : dtype_(other.dtype_),
      shape_(other.shape_),
      num_elements_(other.num_elements_),
      content_size_(other.content_size_),
      strings_(other.strings_) {
  if (other.content_ != nullptr) {
    content_.reset(new char[content_size_]);
    std::memcpy(content_.get(), other.content_.get(), content_size_);
  }
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

Tensor Tensor::String(std::string value) {
  Tensor t(DT_STRING, {});
  t.strings_[0] = std::move(value);
  return t;
}

Tensor Tensor::Strings(std::vector<int64_t> shape, std::vector<std::string> values) {
  Tensor t(DT_STRING, std::move(shape));
  t.strings_ = std::move(values);
  t.strings_.resize(t.num_elements_);
  return t;
}

size_t Tensor::ByteSize() const {
  size_t size = content_size_;
  for (const std::string& s : strings_) size += s.size();
  return size;
}

void Tensor::AppendCanonical(int64_t row, std::string* out) const {
  const auto append_u64 = [out](uint64_t v) { out->append(reinterpret_cast<char*>(&v), 8); };
  append_u64(dtype_);
  const size_t first_dim = row < 0 ? 0 : 1;
  append_u64(shape_.size() - first_dim);
  for (size_t d = first_dim; d < shape_.size(); ++d) append_u64(shape_[d]);
  const int64_t rows = row < 0 || shape_.empty() || shape_[0] == 0 ? 1 : shape_[0];
  const int64_t per_row = row < 0 ? num_elements_ : num_elements_ / rows;
  const int64_t begin = row < 0 ? 0 : row * per_row;
  if (dtype_ == DT_STRING) {
    for (int64_t i = begin; i < begin + per_row; ++i) {
      append_u64(strings_[i].size());
      out->append(strings_[i]);
    }
  } else {
    const size_t width = DataTypeSize(dtype_);
    out->append(content_.get() + begin * width, per_row * width);
  }
}

void Tensor::ToProto(TensorProto* proto) const {
  ToProtoWithoutContent(proto);
  if (dtype_ != DT_STRING) proto->set_content(content_.get(), content_size_);
}

void Tensor::ToProtoWithoutContent(TensorProto* proto) const {
  proto->set_dtype(dtype_);
  proto->mutable_shape()->Assign(shape_.begin(), shape_.end());
  if (dtype_ == DT_STRING) {
    proto->mutable_string_values()->Assign(strings_.begin(), strings_.end());
  }
}

absl::StatusOr<Tensor> Tensor::FromProto(const TensorProto& proto) {
  if (proto.dtype() == DT_INVALID || !DataType_IsValid(proto.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("tensor has invalid dtype ", proto.dtype()));
  }
  for (int64_t d : proto.shape()) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("tensor has negative dimension ", d));
  }
  Tensor t;
  t.dtype_ = proto.dtype();
  t.shape_.assign(proto.shape().begin(), proto.shape().end());
  t.num_elements_ = NumElements(t.shape_);
  if (t.dtype_ == DT_STRING) {
    if (proto.string_values_size() != t.num_elements_) {
      return absl::InvalidArgumentError(absl::StrCat("string tensor ", t.DebugString(), " has ",
                                                     proto.string_values_size(), " values"));
    }
    t.strings_.assign(proto.string_values().begin(), proto.string_values().end());
  } else {
    if (proto.content().size() != t.num_elements_ * DataTypeSize(t.dtype_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", t.DebugString(), " has ", proto.content().size(), " content bytes"));
    }
    t.content_size_ = proto.content().size();
    t.content_.reset(new char[t.content_size_]);
    std::memcpy(t.content_.get(), proto.content().data(), t.content_size_);
  }
  return t;
}

std::string Tensor::DebugString() const {
  return absl::StrCat(DataTypeName(dtype_), "[", absl::StrJoin(shape_, ","), "]");
}

}  // namespace granary
