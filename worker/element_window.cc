#include "worker/element_window.h"

#include <utility>

namespace granary {

void ElementWindow::Append(ReplyElement element) {
  bytes_ += static_cast<int64_t>(element.image->size());
  elements_.push_back(std::move(element));
}

void ElementWindow::Acknowledge(int64_t index) {
  while (!elements_.empty() && elements_.front().index < index) {
    bytes_ -= static_cast<int64_t>(elements_.front().image->size());
    elements_.pop_front();
  }
}

std::vector<ReplyElement> ElementWindow::Read(int64_t max_bytes) const {
  std::vector<ReplyElement> out;
  int64_t bytes = 0;
  for (const ReplyElement& e : elements_) {
    const int64_t size = static_cast<int64_t>(e.image->size());
    if (!out.empty() && bytes + size > max_bytes) break;
    bytes += size;
    out.push_back(e);
  }
  return out;
}

void ElementWindow::Clear() {
  elements_.clear();
  bytes_ = 0;
}

}  // namespace granary
