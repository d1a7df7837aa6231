// Tensor: a dtype, a shape and contiguous row-major values (DESIGN.md §2).
//
// Numeric tensors keep their values in one byte buffer — their own, or a region of a buffer they
// share (a view: the batch op's tensors live inside the element's wire image, so that the
// image is serialized by construction, transport/element_image.h); DT_STRING tensors keep one
// std::string per value. Value semantics (copyable, movable): a copy owns a copy of the values.
// Thread-compatible.
#ifndef GRANARY_PIPELINE_CORE_TENSOR_H_
#define GRANARY_PIPELINE_CORE_TENSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/pipeline.pb.h"
#include "transport/buffer_pool.h"
#include "transport/element_image.h"
#include "transport/tensor_view.h"

namespace granary {

// "uint8", "int32", "int64", "float32", "float64", "bool", "string".
absl::string_view DataTypeName(DataType dtype);
// Inverse of DataTypeName; InvalidArgument naming `name` otherwise.
absl::StatusOr<DataType> DataTypeFromName(absl::string_view name);

// Maps a C++ value type to its DataType.
template <typename T>
struct DataTypeOf;
template <> struct DataTypeOf<uint8_t> { static constexpr DataType value = DT_UINT8; };
template <> struct DataTypeOf<int32_t> { static constexpr DataType value = DT_INT32; };
template <> struct DataTypeOf<int64_t> { static constexpr DataType value = DT_INT64; };
template <> struct DataTypeOf<float> { static constexpr DataType value = DT_FLOAT; };
template <> struct DataTypeOf<double> { static constexpr DataType value = DT_DOUBLE; };
template <> struct DataTypeOf<bool> { static constexpr DataType value = DT_BOOL; };

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled numeric values, or empty strings for DT_STRING.
  Tensor(DataType dtype, std::vector<int64_t> shape);
  // Like the constructor, but numeric values are left uninitialized: for producers that
  // overwrite every value (decoders, crops, batching), sparing a memset of the whole buffer.
  // Inside a ScopedRowDestinations it may be a view of the row's place in its batch
  // (row_destination.h).
  static Tensor Uninitialized(DataType dtype, std::vector<int64_t> shape);

  // A numeric tensor whose values are the `DtypeSize(dtype) * elements` bytes at `data`,
  // which `keeper` keeps alive (and no one else writes). REQUIRES: dtype numeric.
  static Tensor View(DataType dtype, std::vector<int64_t> shape, char* data,
                     std::shared_ptr<const void> keeper);

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;

  template <typename T>
  static Tensor Scalar(T value) {
    Tensor t(DataTypeOf<T>::value, {});
    *t.data<T>() = value;
    return t;
  }
  static Tensor String(std::string value);
  // A tensor of `shape` holding `values` (row-major). REQUIRES: sizes agree.
  template <typename T>
  static Tensor FromVector(std::vector<int64_t> shape, const std::vector<T>& values);
  static Tensor Strings(std::vector<int64_t> shape, std::vector<std::string> values);

  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t num_elements() const { return num_elements_; }
  int rank() const { return static_cast<int>(shape_.size()); }

  // Numeric values. REQUIRES: dtype() == DataTypeOf<T>::value.
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(content_);
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(content_);
  }
  // The raw row-major bytes of a numeric tensor.
  absl::string_view content() const { return absl::string_view(content_, content_size_); }
  char* mutable_bytes() { return content_; }

  // The tensor as a view of its values (valid while the tensor is alive and unchanged).
  TensorView view() const;

  // DT_STRING values.
  const std::vector<std::string>& strings() const { return strings_; }
  std::vector<std::string>& mutable_strings() { return strings_; }

  // Approximate memory held by the values.
  size_t ByteSize() const;

  void ToProto(TensorProto* proto) const;
  // InvalidArgument when the content size disagrees with dtype and shape.
  static absl::StatusOr<Tensor> FromProto(const TensorProto& proto);

  // "uint8[64,64,3]".
  std::string DebugString() const;

  friend bool operator==(const Tensor& a, const Tensor& b) {
    return a.dtype_ == b.dtype_ && a.shape_ == b.shape_ && a.content() == b.content() &&
           a.strings_ == b.strings_;
  }
  friend bool operator!=(const Tensor& a, const Tensor& b) { return !(a == b); }

 private:
  DataType dtype_ = DT_INVALID;
  std::vector<int64_t> shape_;
  int64_t num_elements_ = 0;
  // Sets content_ to `size` uninitialized bytes of its own (throws std::bad_alloc, as `new`
  // does, when there are none).
  void AllocateContent(size_t size);

  // Numeric values: content_size_ bytes, in owned_ (malloc-aligned; small values) or in a
  // buffer keeper_ keeps alive: a pooled one of its own (large values) or, for a view, a
  // shared one (aligned to at least the dtype's size).
  char* content_ = nullptr;
  size_t content_size_ = 0;
  std::unique_ptr<char[]> owned_;
  std::shared_ptr<const void> keeper_;
  std::vector<std::string> strings_;
};

template <typename T>
Tensor Tensor::FromVector(std::vector<int64_t> shape, const std::vector<T>& values) {
  Tensor t(DataTypeOf<T>::value, std::move(shape));
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.num_elements(); ++i) {
    t.data<T>()[i] = values[i];
  }
  return t;
}

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_TENSOR_H_
