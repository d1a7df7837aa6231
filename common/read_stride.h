// ReadStride: which indices of a task its reader reads (TaskState.read_stride, .read_offset).
// An elastic resume at more consumers than the epoch had work left for has several consumers
// read one task's elements (DESIGN.md §6, "Elastic resume"): each through a task of its own that
// computes the same elements and reads every read_stride-th index from read_offset on. The
// dispatcher counts a consumer's elements with it and the reader passes over the other indices.
//
// A value type; thread-compatible.
#ifndef GRANARY_COMMON_READ_STRIDE_H_
#define GRANARY_COMMON_READ_STRIDE_H_

#include <algorithm>
#include <cstdint>

namespace granary {

class ReadStride {
 public:
  // Every index.
  ReadStride() = default;
  // The indices i with i % stride == offset; a stride of 0 or 1 (a task read whole) is every
  // index. REQUIRES: 0 <= offset < stride when stride > 1.
  ReadStride(int64_t stride, int64_t offset)
      : stride_(stride > 1 ? stride : 1), offset_(stride > 1 ? offset : 0) {}

  bool Reads(int64_t index) const { return index % stride_ == offset_; }

  // How many indices of [from, to) it reads (0 when to <= from).
  int64_t CountIn(int64_t from, int64_t to) const {
    return to <= from ? 0 : Below(to) - Below(std::max<int64_t>(from, 0));
  }

  int64_t stride() const { return stride_; }
  int64_t offset() const { return offset_; }

 private:
  // How many indices of [0, end) it reads.
  int64_t Below(int64_t end) const {
    return end <= offset_ ? 0 : (end - offset_ + stride_ - 1) / stride_;
  }

  int64_t stride_ = 1;
  int64_t offset_ = 0;
};

}  // namespace granary

#endif  // GRANARY_COMMON_READ_STRIDE_H_
