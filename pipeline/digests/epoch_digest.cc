#include "pipeline/digests/epoch_digest.h"

namespace granary {

void EpochDigest::Add(const Element& element) {
  std::vector<TensorView> views;
  views.reserve(element.tensors.size());
  for (const Tensor& t : element.tensors) views.push_back(t.view());
  Add(views);
}

void EpochDigest::Add(const std::vector<TensorView>& tensors) {
  const int64_t rows =
      batched_ && !tensors.empty() && !tensors[0].shape.empty() ? tensors[0].shape[0] : 1;
  for (int64_t r = 0; r < rows; ++r) {
    row_.Reset();
    for (const TensorView& t : tensors) {
      // The whole tensor, or row r along dimension 0.
      const bool by_row = batched_;
      row_.UpdateU64(t.dtype);
      const size_t first_dim = by_row ? 1 : 0;
      row_.UpdateU64(t.shape.size() - first_dim);
      for (size_t d = first_dim; d < t.shape.size(); ++d) row_.UpdateU64(t.shape[d]);
      const int64_t tensor_rows = !by_row || t.shape.empty() || t.shape[0] == 0 ? 1 : t.shape[0];
      const int64_t per_row = t.num_elements() / tensor_rows;
      const int64_t begin = by_row ? r * per_row : 0;
      if (t.dtype == DT_STRING) {
        for (int64_t i = begin; i < begin + per_row; ++i) {
          row_.UpdateU64(t.strings[i].size());
          row_.Update(t.strings[i]);
        }
      } else {
        const size_t width = DtypeSize(t.dtype);
        row_.Update(absl::string_view(t.data + begin * width, per_row * width));
      }
    }
    const uint64_t h = row_.Digest();
    multiset_ += h;
    ordered_.UpdateU64(h);
  }
  rows_ += rows;
}

}  // namespace granary
