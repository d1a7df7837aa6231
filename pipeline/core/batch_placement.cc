#include "pipeline/core/batch_placement.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace granary {

BatchPlacement::Batch* BatchPlacement::FindOrLayOut(int64_t batch, const Element* row) {
  auto it = batches_.find(batch);
  if (it != batches_.end()) return &it->second;
  if (batch <= taken_through_) return nullptr;  // Too late: the batch is made.
  Batch laid;
  if (row != nullptr) {
    for (const Tensor& t : row->tensors) {
      std::vector<int64_t> shape = {batch_size_};
      shape.insert(shape.end(), t.shape().begin(), t.shape().end());
      laid.placed.specs.push_back({t.dtype(), std::move(shape)});
    }
    last_specs_ = laid.placed.specs;
  } else if (!last_specs_.empty()) {
    // No row of this batch has finished yet: guess it is shaped as the last batch was, so that
    // even its first rows are made in place.
    laid.placed.specs = last_specs_;
  } else {
    return nullptr;
  }
  // The longest provenance (ten-byte varints): the batch op writes the real one, which moves no
  // content region, and truncates the image to it.
  laid.layout = std::make_unique<ImageLayout>(laid.placed.specs, UINT64_MAX, -1);
  absl::StatusOr<BufferRef> buffer = pool_->Allocate(laid.layout->size());
  if (!buffer.ok()) return nullptr;  // The batch op allocates (and reports) when it copies.
  laid.placed.image = *std::move(buffer);
  return &batches_.emplace(batch, std::move(laid)).first->second;
}

std::vector<RowDestination> BatchPlacement::Destinations(int64_t seq) {
  std::vector<RowDestination> destinations;
  absl::MutexLock lock(&mu_);
  const Batch* laid = FindOrLayOut(seq / batch_size_, nullptr);
  if (laid == nullptr) return destinations;
  const int64_t slot = seq % batch_size_;
  for (size_t t = 0; t < laid->placed.specs.size(); ++t) {
    const ImageTensorSpec& spec = laid->placed.specs[t];
    RowDestination d;
    d.dtype = spec.dtype;
    d.shape.assign(spec.shape.begin() + 1, spec.shape.end());
    const size_t row_bytes = laid->layout->content_size(t) / batch_size_;
    d.data = laid->placed.image->data() + laid->layout->content_offset(t) + slot * row_bytes;
    d.keeper = laid->placed.image;
    destinations.push_back(std::move(d));
  }
  return destinations;
}

void BatchPlacement::Place(int64_t seq, Element& row) {
  if (row.tensors.empty()) return;
  for (const Tensor& t : row.tensors) {
    if (t.dtype() == DT_STRING) return;  // String values belong to the framing: copied later.
  }
  const int64_t slot = seq % batch_size_;
  BufferRef image;
  std::vector<char*> places;
  {
    absl::MutexLock lock(&mu_);
    const Batch* laid = FindOrLayOut(seq / batch_size_, &row);
    if (laid == nullptr || laid->placed.specs.size() != row.tensors.size()) return;
    for (size_t t = 0; t < row.tensors.size(); ++t) {
      const ImageTensorSpec& spec = laid->placed.specs[t];
      const std::vector<int64_t>& shape = row.tensors[t].shape();
      if (spec.dtype != row.tensors[t].dtype() || spec.shape.size() != shape.size() + 1 ||
          !std::equal(shape.begin(), shape.end(), spec.shape.begin() + 1)) {
        return;
      }
      places.push_back(laid->placed.image->data() + laid->layout->content_offset(t) +
                       slot * (laid->layout->content_size(t) / batch_size_));
    }
    image = laid->placed.image;
  }
  // A tensor inside the image but not in its own place (a UDF claimed another tensor's place
  // for it): copying in place could overwrite a tensor not yet copied. Left to the batch op.
  const char* const begin = image->data();
  const char* const end = begin + image->size();
  for (size_t t = 0; t < row.tensors.size(); ++t) {
    const char* data = row.tensors[t].content().data();
    if (data >= begin && data < end && data != places[t]) return;
  }
  // Outside the lock: each slot is written by the one thread that has its row.
  for (size_t t = 0; t < row.tensors.size(); ++t) {
    Tensor& tensor = row.tensors[t];
    if (tensor.content().data() == places[t]) continue;  // Made in place by its UDF.
    std::memcpy(places[t], tensor.content().data(), tensor.content().size());
    std::vector<int64_t> shape = tensor.shape();
    tensor = Tensor::View(tensor.dtype(), std::move(shape), places[t], image);
  }
}

std::optional<BatchPlacement::Placed> BatchPlacement::Take(int64_t batch) {
  absl::MutexLock lock(&mu_);
  std::optional<Placed> placed;
  auto it = batches_.find(batch);
  if (it != batches_.end()) placed = std::move(it->second.placed);
  batches_.erase(batches_.begin(), batches_.upper_bound(batch));
  taken_through_ = std::max(taken_through_, batch);
  return placed;
}

}  // namespace granary
