// batch(batch_size, drop_remainder): stacks `batch_size` consecutive elements into one whose
// tensors gain a leading batch dimension. batch_size is at most kMaxBatchSize and a batch's
// bytes at most kMaxElementBytes (pipeline/limits.h; ResourceExhausted beyond). The last, smaller
// batch is kept unless drop_remainder. Every element of a batch must agree in tensor count, dtypes
// and shapes; the error names the element that does not. State: only the input's (a batch is built
// within one GetNext).
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/limits.h"
#include "pipeline/op.h"

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

Element Stack(std::vector<Element>& rows) {
  Element batch;
  batch.split_id = rows[0].split_id;
  batch.record = rows[0].record;
  const int64_t n = static_cast<int64_t>(rows.size());
  for (size_t t = 0; t < rows[0].tensors.size(); ++t) {
    const Tensor& proto = rows[0].tensors[t];
    std::vector<int64_t> shape = {n};
    shape.insert(shape.end(), proto.shape().begin(), proto.shape().end());
    Tensor stacked = Tensor::Uninitialized(proto.dtype(), std::move(shape));
    if (proto.dtype() == DT_STRING) {
      auto& out = stacked.mutable_strings();
      out.clear();
      for (Element& row : rows) {
        for (std::string& s : row.tensors[t].mutable_strings()) out.push_back(std::move(s));
      }
    } else {
      const size_t row_bytes = proto.content().size();
      char* dst = stacked.mutable_bytes();
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(dst + i * row_bytes, rows[i].tensors[t].content().data(), row_bytes);
      }
    }
    batch.tensors.push_back(std::move(stacked));
  }
  return batch;
}

class BatchIterator : public UnaryOpIterator {
 public:
  BatchIterator(std::unique_ptr<Iterator> input, int64_t batch_size, bool drop_remainder,
                std::string label)
      : UnaryOpIterator(std::move(input)),
        batch_size_(batch_size),
        drop_remainder_(drop_remainder),
        label_(std::move(label)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    std::vector<Element> rows;
    rows.reserve(std::min<int64_t>(batch_size_, 1024));
    int64_t bytes = 0;
    while (static_cast<int64_t>(rows.size()) < batch_size_) {
      Element e;
      bool end = false;
      RETURN_IF_ERROR(input_->GetNext(&e, &end));
      if (end) break;
      if (!rows.empty()) RETURN_IF_ERROR(CheckCompatible(rows[0], e, label_));
      bytes += static_cast<int64_t>(e.ByteSize());
      if (bytes > kMaxElementBytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            label_, " at ", rows.empty() ? e.Origin() : rows[0].Origin(), ": the batch's first ",
            rows.size() + 1, " rows (of batch_size ", batch_size_, ") are already ",
            HumanBytes(bytes), ", above the limit of ", HumanBytes(kMaxElementBytes),
            " per element (kMaxElementBytes, pipeline/limits.h); lower batch_size"));
      }
      rows.push_back(std::move(e));
    }
    const int64_t n = static_cast<int64_t>(rows.size());
    if (n == 0 || (drop_remainder_ && n < batch_size_)) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    *out = Stack(rows);
    *end_of_sequence = false;
    return absl::OkStatus();
  }
  absl::Status Save(StateWriter& writer) override { return SaveInput(writer); }
  absl::Status Restore(const StateReader& reader) override { return RestoreInput(reader); }

 private:
  const int64_t batch_size_;
  const bool drop_remainder_;
  const std::string label_;
};

}  // namespace

OpInfo BatchOp() {
  OpInfo info;
  info.name = "batch";
  info.batches = true;
  info.params = {{"batch_size", ParamType::kInt, true}, {"drop_remainder", ParamType::kBool}};
  info.validate = [](const Params& params) -> absl::Status {
    const int64_t batch_size = params.GetInt("batch_size");
    if (batch_size < 1) return params.Invalid("batch_size", "must be at least 1");
    return CheckParamLimit(params, "batch_size", batch_size, kMaxBatchSize, "kMaxBatchSize");
  };
  info.factory = [](std::unique_ptr<Iterator> input,
                    const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<Iterator>> {
    const int64_t batch_size = args.params.GetInt("batch_size");
    return std::make_unique<BatchIterator>(std::move(input), batch_size,
                                           args.params.GetBool("drop_remainder"), args.label);
  };
  return info;
}

}  // namespace granary
