// The "range" source: the int64 values start, start+step, ... below stop (above, for a negative
// step), as scalar elements. params: start (default 0), stop (required), step (default 1),
// elements_per_split (default 0: one split). A split's records are value indices.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "pipeline/sources/builtin_sources.h"
#include "pipeline/core/source.h"

namespace granary {
namespace {

int64_t RangeSize(int64_t start, int64_t stop, int64_t step) {
  if (step > 0) return stop > start ? (stop - start + step - 1) / step : 0;
  return start > stop ? (start - stop - step - 1) / -step : 0;
}

class RangeReader : public SplitReader {
 public:
  RangeReader(int64_t start, int64_t step, int64_t next_index, int64_t end_index)
      : start_(start), step_(step), next_(next_index), end_(end_index) {}

  absl::Status Next(Element* out, bool* end) override {
    *end = next_ >= end_;
    if (*end) return absl::OkStatus();
    out->tensors.clear();
    out->tensors.push_back(Tensor::Scalar<int64_t>(start_ + next_ * step_));
    ++next_;
    return absl::OkStatus();
  }

  int64_t offset() const override { return next_; }

 private:
  const int64_t start_, step_;
  int64_t next_;
  const int64_t end_;
};

}  // namespace

SourceInfo RangeSource() {
  SourceInfo info;
  info.type = "range";
  info.params = {{"start", ParamType::kInt},
                 {"stop", ParamType::kInt, true},
                 {"step", ParamType::kInt},
                 {"elements_per_split", ParamType::kInt}};
  info.validate = [](const Params& p, Env*) -> absl::Status {
    if (p.GetInt("step", 1) == 0) return p.Invalid("step", "must not be 0");
    if (p.GetInt("elements_per_split", 0) < 0) {
      return p.Invalid("elements_per_split", "must not be negative");
    }
    return absl::OkStatus();
  };
  info.enumerate = [](const Params& p, Env*) -> absl::StatusOr<std::vector<Split>> {
    const int64_t step = p.GetInt("step", 1);
    const int64_t per_split = p.GetInt("elements_per_split", 0);
    const int64_t size = RangeSize(p.GetInt("start"), p.GetInt("stop"), step);
    const int64_t chunk = per_split > 0 ? per_split : std::max<int64_t>(size, 1);
    std::vector<Split> splits;
    for (int64_t begin = 0; begin < size; begin += chunk) {
      Split& s = splits.emplace_back();
      s.set_id(splits.size() - 1);
      s.set_begin_offset(begin);
      s.set_begin_record(begin);
      s.set_num_records(std::min(chunk, size - begin));
    }
    return splits;
  };
  info.open = [](const Params& p, const SplitOpenContext&, const Split& split, int64_t offset,
                 int64_t) -> absl::StatusOr<std::unique_ptr<SplitReader>> {
    return std::make_unique<RangeReader>(p.GetInt("start"), p.GetInt("step", 1), offset,
                                         split.begin_record() + split.num_records());
  };
  return info;
}

}  // namespace granary
