#include "pipeline/core/tensor.h"

#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "pipeline/core/row_destination.h"

namespace granary {

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

void Tensor::AllocateContent(size_t size) {
  content_size_ = size;
  if (size < kPooledBytes) {
    owned_.reset(new char[size]);
    content_ = owned_.get();
    return;
  }
  // Large values (decoded images, crops) come from the buffer pool: freed on another thread
  // than the one that made them (a parallel_map's thread, then batch's), malloc's per-thread
  // arenas would unmap and map them again, a page fault per 4 KiB (transport/buffer_pool.h).
  absl::StatusOr<BufferRef> buffer = BufferPool::Default()->Allocate(size);
  if (!buffer.ok()) throw std::bad_alloc();  // What `new` does: allocation_guard.h reports it.
  content_ = (*buffer)->data();
  keeper_ = *std::move(buffer);
}

Tensor::Tensor(DataType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)), num_elements_(NumElements(shape_)) {
  if (dtype_ == DT_STRING) {
    strings_.resize(num_elements_);
  } else {
    AllocateContent(num_elements_ * DtypeSize(dtype_));
    std::memset(content_, 0, content_size_);
  }
}

Tensor Tensor::Uninitialized(DataType dtype, std::vector<int64_t> shape) {
  if (dtype == DT_STRING) return Tensor(dtype, std::move(shape));
  // A row's tensor made straight into its batch (row_destination.h).
  if (RowDestination* d = ScopedRowDestinations::Claim(dtype, shape)) {
    return View(dtype, std::move(shape), d->data, d->keeper);
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.num_elements_ = NumElements(t.shape_);
  t.AllocateContent(t.num_elements_ * DtypeSize(dtype));
  return t;
}

Tensor Tensor::View(DataType dtype, std::vector<int64_t> shape, char* data,
                    std::shared_ptr<const void> keeper) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.num_elements_ = NumElements(t.shape_);
  t.content_size_ = t.num_elements_ * DtypeSize(dtype);
  t.content_ = data;
  t.keeper_ = std::move(keeper);
  return t;
}

Tensor::Tensor(const Tensor& other)
    : dtype_(other.dtype_),
      shape_(other.shape_),
      num_elements_(other.num_elements_),
      strings_(other.strings_) {
  if (other.content_ != nullptr) {
    AllocateContent(other.content_size_);
    std::memcpy(content_, other.content_, content_size_);
  }
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

Tensor::Tensor(Tensor&& other) noexcept
    : dtype_(other.dtype_),
      shape_(std::move(other.shape_)),
      num_elements_(other.num_elements_),
      content_(std::exchange(other.content_, nullptr)),
      content_size_(std::exchange(other.content_size_, 0)),
      owned_(std::move(other.owned_)),
      keeper_(std::move(other.keeper_)),
      strings_(std::move(other.strings_)) {}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    dtype_ = other.dtype_;
    shape_ = std::move(other.shape_);
    num_elements_ = other.num_elements_;
    content_ = std::exchange(other.content_, nullptr);
    content_size_ = std::exchange(other.content_size_, 0);
    owned_ = std::move(other.owned_);
    keeper_ = std::move(other.keeper_);
    strings_ = std::move(other.strings_);
  }
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

TensorView Tensor::view() const {
  TensorView view;
  view.dtype = dtype_;
  view.shape = shape_;
  view.data = content_;
  view.size = content_size_;
  view.strings.assign(strings_.begin(), strings_.end());
  return view;
}

void Tensor::ToProto(TensorProto* proto) const {
  proto->set_dtype(dtype_);
  proto->mutable_shape()->Assign(shape_.begin(), shape_.end());
  if (dtype_ == DT_STRING) {
    proto->mutable_string_values()->Assign(strings_.begin(), strings_.end());
  } else {
    proto->set_content(content_, content_size_);
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
    if (proto.content().size() != t.num_elements_ * DtypeSize(t.dtype_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", t.DebugString(), " has ", proto.content().size(), " content bytes"));
    }
    t.AllocateContent(proto.content().size());
    std::memcpy(t.content_, proto.content().data(), t.content_size_);
  }
  return t;
}

std::string Tensor::DebugString() const {
  return absl::StrCat(DataTypeName(dtype_), "[", absl::StrJoin(shape_, ","), "]");
}

}  // namespace granary
