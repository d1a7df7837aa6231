// batch(batch_size, drop_remainder): stacks `batch_size` consecutive elements into one whose
// tensors gain a leading batch dimension. batch_size is at most kMaxBatchSize and a batch's
// bytes at most kMaxElementBytes (pipeline/core/limits.h; ResourceExhausted beyond). The last, smaller
// batch is kept unless drop_remainder. Every element of a batch must agree in tensor count, dtypes
// and shapes; the error names the element that does not. State: only the input's (a batch is built
// within one GetNext).
#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/core/limits.h"
#include "pipeline/ops/builtin_ops.h"
#include "pipeline/spec/op_declarations.h"
#include "pipeline/core/op.h"
#include "transport/buffer_pool.h"
#include "transport/element_image.h"

namespace granary {
namespace {

absl::Status CheckCompatible(const Element& first, const Element& e, const std::string& label) {
  if (e.tensors.size() != first.tensors.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": element at ", e.Origin(), " has ", e.tensors.size(),
                     " tensors, the batch started with ", first.tensors.size()));
  }
  for (size_t t = 0; t < e.tensors.size(); ++t) {
    const Tensor& a = first.tensors[t];
    const Tensor& b = e.tensors[t];
    if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": element at ", e.Origin(), " tensor ", t, " is ", b.DebugString(),
          ", the batch started with ", a.DebugString(), " (resize or crop to one shape first)"));
    }
  }
  return absl::OkStatus();
}

// Lays the batch out as a wire image (transport/element_image.h) and copies each row straight
// into its place there: the batch's tensors are views into the image, so the batch is
// serialized by construction. The image comes from the run's buffer pool, which hands the
// previous batch's memory out again instead of faulting in fresh pages for each batch.
absl::StatusOr<Element> Stack(std::vector<Element>& rows, BufferPool* pool) {
  const int64_t n = static_cast<int64_t>(rows.size());
  const size_t num_tensors = rows[0].tensors.size();
  std::vector<std::vector<std::string>> strings(num_tensors);
  std::vector<ImageTensorSpec> specs(num_tensors);
  for (size_t t = 0; t < num_tensors; ++t) {
    const Tensor& first = rows[0].tensors[t];
    specs[t].dtype = first.dtype();
    specs[t].shape = {n};
    specs[t].shape.insert(specs[t].shape.end(), first.shape().begin(), first.shape().end());
    if (first.dtype() == DT_STRING) {
      for (Element& row : rows) {
        for (std::string& value : row.tensors[t].mutable_strings()) {
          strings[t].push_back(std::move(value));
        }
      }
      specs[t].strings = &strings[t];
    }
  }
  Element batch;
  batch.split_id = rows[0].split_id;
  batch.record = rows[0].record;
  const ImageLayout layout(specs, batch.split_id, batch.record);
  ASSIGN_OR_RETURN(batch.image, pool->Allocate(layout.size()));
  char* const image = batch.image->data();
  layout.WriteFraming(image);
  for (size_t t = 0; t < num_tensors; ++t) {
    if (specs[t].dtype == DT_STRING) {
      batch.tensors.push_back(Tensor::Strings(std::move(specs[t].shape), std::move(strings[t])));
      continue;
    }
    char* const dst = image + layout.content_offset(t);
    const size_t row_bytes = layout.content_size(t) / std::max<int64_t>(n, 1);
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(dst + i * row_bytes, rows[i].tensors[t].content().data(), row_bytes);
    }
    batch.tensors.push_back(Tensor::View(specs[t].dtype, std::move(specs[t].shape), dst,
                                         batch.image));
  }
  return batch;
}

// The batch the placement's threads already wrote `rows` into (batch_placement.h), if every
// row is in its place there; the image gets the batch's provenance and its final size.
std::optional<Element> FromPlaced(const std::vector<Element>& rows,
                                  const BatchPlacement::Placed& placed) {
  const ImageLayout layout(placed.specs, rows[0].split_id, rows[0].record);
  if (layout.size() > placed.image->size()) return std::nullopt;
  const int64_t n = static_cast<int64_t>(rows.size());
  for (int64_t i = 0; i < n; ++i) {
    if (rows[i].tensors.size() != placed.specs.size()) return std::nullopt;
    for (size_t t = 0; t < placed.specs.size(); ++t) {
      const size_t row_bytes = layout.content_size(t) / n;
      const char* const slot = placed.image->data() + layout.content_offset(t) + i * row_bytes;
      if (row_bytes > 0 && rows[i].tensors[t].content().data() != slot) return std::nullopt;
    }
  }
  layout.WriteFraming(placed.image->data());
  placed.image->Truncate(layout.size());
  Element batch;
  batch.split_id = rows[0].split_id;
  batch.record = rows[0].record;
  batch.image = placed.image;
  for (size_t t = 0; t < placed.specs.size(); ++t) {
    batch.tensors.push_back(Tensor::View(placed.specs[t].dtype, placed.specs[t].shape,
                                         placed.image->data() + layout.content_offset(t),
                                         placed.image));
  }
  return batch;
}

class BatchIterator : public UnaryOpIterator {
 public:
  BatchIterator(std::unique_ptr<Iterator> input, int64_t batch_size, bool drop_remainder,
                std::string label, std::shared_ptr<BatchPlacement> placement, BufferPool* pool)
      : UnaryOpIterator(std::move(input)),
        batch_size_(batch_size),
        drop_remainder_(drop_remainder),
        label_(std::move(label)),
        placement_(std::move(placement)),
        pool_(pool) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    std::vector<Element> rows;
    rows.reserve(std::min<int64_t>(batch_size_, 1024));
    const int64_t first_seq = next_seq_;
    int64_t bytes = 0;
    while (static_cast<int64_t>(rows.size()) < batch_size_) {
      Element e;
      bool end = false;
      const absl::Status status = input_->GetNext(&e, &end);
      if (!status.ok()) {
        ++next_seq_;  // A failed element had its place in the input's output too.
        return status;
      }
      if (end) break;
      ++next_seq_;
      if (!rows.empty()) RETURN_IF_ERROR(CheckCompatible(rows[0], e, label_));
      bytes += static_cast<int64_t>(e.ByteSize());
      if (bytes > kMaxElementBytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            label_, " at ", rows.empty() ? e.Origin() : rows[0].Origin(), ": the batch's first ",
            rows.size() + 1, " rows (of batch_size ", batch_size_, ") are already ",
            HumanBytes(bytes), ", above the limit of ", HumanBytes(kMaxElementBytes),
            " per element (kMaxElementBytes, pipeline/core/limits.h); lower batch_size"));
      }
      rows.push_back(std::move(e));
    }
    const int64_t n = static_cast<int64_t>(rows.size());
    if (n == 0 || (drop_remainder_ && n < batch_size_)) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    if (placement_ != nullptr) {
      // The image of the batch the last row was placed in, dropping every earlier one; usable
      // when this batch is exactly that placement's batch.
      const int64_t placed_batch = (first_seq + n - 1) / batch_size_;
      std::optional<BatchPlacement::Placed> placed = placement_->Take(placed_batch);
      if (placed.has_value() && n == batch_size_ && first_seq == placed_batch * batch_size_) {
        if (std::optional<Element> batch = FromPlaced(rows, *placed)) {
          *out = *std::move(batch);
          *end_of_sequence = false;
          return absl::OkStatus();
        }
      }
    }
    ASSIGN_OR_RETURN(*out, Stack(rows, pool_));
    *end_of_sequence = false;
    return absl::OkStatus();
  }
  absl::Status Save(StateWriter& writer) override { return SaveInput(writer); }
  absl::Status Restore(const StateReader& reader) override {
    next_seq_ = 0;  // The input's output numbers count from its restored position too.
    return RestoreInput(reader);
  }

 private:
  const int64_t batch_size_;
  const bool drop_remainder_;
  const std::string label_;
  const std::shared_ptr<BatchPlacement> placement_;
  BufferPool* const pool_;
  // The input's output sequence number of the next row (batch_placement.h).
  int64_t next_seq_ = 0;
};

}  // namespace

OpInfo BatchOp() {
  OpInfo info = BatchOpDeclaration();
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    const int64_t batch_size = args.params.GetInt("batch_size");
    return std::make_unique<BatchIterator>(std::move(input), batch_size,
                                           args.params.GetBool("drop_remainder"), args.label,
                                           args.placement, args.ctx.pool);
  };
  return info;
}

}  // namespace granary
