// ElementWindow: a task's elements produced but not yet acknowledged by its client, by index,
// bounded in bytes (DESIGN.md §4) — what tf.data service's worker calls its task's buffer.
//
// The producer appends each element's wire image (shared, never copied: the same BufferRef
// later becomes the slices of a GetElements answer) with its index and checksum; a request at
// from_index acknowledges and drops everything below it and reads from there. The producer waits
// while the window is full (HasRoom), so a slow client holds the worker's memory to about one
// window plus one element.
//
// Thread-compatible: the TaskRunner guards it with its mutex.
#ifndef GRANARY_WORKER_ELEMENT_WINDOW_H_
#define GRANARY_WORKER_ELEMENT_WINDOW_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "transport/elements_reply.h"

namespace granary {

class ElementWindow {
 public:
  explicit ElementWindow(int64_t max_bytes) : max_bytes_(max_bytes) {}

  bool empty() const { return elements_.empty(); }
  // The lowest index held. REQUIRES: !empty().
  int64_t front_index() const { return elements_.front().index; }
  int64_t bytes() const { return bytes_; }
  int64_t max_bytes() const { return max_bytes_; }
  // Whether another element may be appended: the window is below its bound, or empty (an
  // element larger than the whole window still goes through, alone).
  bool HasRoom() const { return elements_.empty() || bytes_ < max_bytes_; }

  // REQUIRES: element.index above every index held.
  void Append(ReplyElement element);
  // Drops every element below `index`.
  void Acknowledge(int64_t index);
  // The elements from the front on, as long as their images total at most max_bytes — but at
  // least one when any is held.
  std::vector<ReplyElement> Read(int64_t max_bytes) const;
  void Clear();

 private:
  const int64_t max_bytes_;
  std::deque<ReplyElement> elements_;
  int64_t bytes_ = 0;
};

}  // namespace granary

#endif  // GRANARY_WORKER_ELEMENT_WINDOW_H_
