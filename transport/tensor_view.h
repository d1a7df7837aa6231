// TensorView: a tensor's dtype, shape and values, pointing at bytes someone else owns — a
// received element's buffer, a shared-memory mapping, a pipeline Tensor. Copying a view copies
// the pointers, never the values. Whoever hands one out says how long the bytes stay valid
// (granary::ReceivedElement: as long as the element, or any copy of it, is alive).
//
// Numeric values are row-major and little-endian; `data` is aligned to at least the dtype's
// size (64 bytes for every element Granary writes, transport/FORMAT.md). Thread-compatible.
#ifndef GRANARY_TRANSPORT_TENSOR_VIEW_H_
#define GRANARY_TRANSPORT_TENSOR_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/pipeline.pb.h"

namespace granary {

struct TensorView {
  DataType dtype = DT_INVALID;
  std::vector<int64_t> shape;
  // Numeric dtypes: the values' bytes (num_elements() * dtype size of them).
  const char* data = nullptr;
  size_t size = 0;
  // DT_STRING: the values, row-major.
  std::vector<absl::string_view> strings;

  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // REQUIRES: T matches dtype (float for DT_FLOAT, ...).
  template <typename T>
  const T* values() const {
    return reinterpret_cast<const T*>(data);
  }
  absl::string_view content() const { return absl::string_view(data, size); }
};

}  // namespace granary

#endif  // GRANARY_TRANSPORT_TENSOR_VIEW_H_
