#include "client/trainer_tail_runner.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "transport/element_image.h"

namespace granary {
namespace {

// An element's largest size (pipeline/core/limits.h's kMaxElementBytes, which the batch op
// checks on the worker).
constexpr size_t kMaxElementBytes = size_t{2} << 30;

std::string Describe(const TensorView& t) {
  return absl::StrCat(DataType_Name(t.dtype), " [", absl::StrJoin(t.shape, ", "), "]");
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainerTailRunner>> TrainerTailRunner::Create(
    const TrainerTailDef& def) {
  if (def.steps_size() > kMaxTrainerTailSteps) {
    return absl::InvalidArgumentError(absl::StrCat("trainer-side tail: ", def.steps_size(),
                                                   " steps (at most ", kMaxTrainerTailSteps, ")"));
  }
  std::vector<Step> steps;
  for (const TrainerTailDef::Step& step : def.steps()) {
    const auto invalid = [&step](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat("trainer-side tail: ", step.label(), ": ", what));
    };
    if (!step.has_normalize()) return invalid("not a normalize step, the only kind a client runs");
    const TrainerTailDef::Normalize& n = step.normalize();
    if (n.index() < 0) return invalid(absl::StrCat("tensor index ", n.index(), " is negative"));
    if (n.mean().empty() || n.std().empty()) return invalid("mean and std need a value each");
    if (n.mean_size() > kMaxTrainerTailChannelValues ||
        n.std_size() > kMaxTrainerTailChannelValues) {
      return invalid(absl::StrCat("mean and std may have at most ", kMaxTrainerTailChannelValues,
                                  " values (per channel)"));
    }
    for (float s : n.std()) {
      if (s == 0.0f) return invalid("a std entry is 0");
    }
    if (n.mean_size() > 1 && n.std_size() > 1 && n.mean_size() != n.std_size()) {
      return invalid(absl::StrCat("mean has ", n.mean_size(), " values and std ", n.std_size()));
    }
    steps.push_back(Step{step.label(), n.index(),
                         NormalizeKernel(n.scale(), {n.mean().begin(), n.mean().end()},
                                         {n.std().begin(), n.std().end()})});
  }
  if (def.batch_dims() < 0 || def.batch_dims() > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer-side tail: ", def.batch_dims(), " batch dimensions"));
  }
  return std::unique_ptr<TrainerTailRunner>(
      new TrainerTailRunner(std::move(steps), def.batch_dims()));
}

absl::StatusOr<BufferRef> TrainerTailRunner::Run(absl::string_view image, BufferPool* pool) const {
  ASSIGN_OR_RETURN(const ImageView in, ParseImage(image));
  const size_t rank = 3 + batch_dims_;
  // Each step's tensor must be what normalize takes; the steps' tensors become float32.
  std::vector<DataType> dtypes;
  for (const TensorView& t : in.tensors) dtypes.push_back(t.dtype);
  for (const Step& step : steps_) {
    const auto refuse = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat(step.label, ": normalize (run by the trainer): ", "element of split ",
                       in.split_id, " record ", in.record, ": ", what));
    };
    if (step.index >= static_cast<int64_t>(in.tensors.size())) {
      return refuse(absl::StrCat("no tensor ", step.index, " (it has ", in.tensors.size(), ")"));
    }
    const TensorView& t = in.tensors[step.index];
    if ((dtypes[step.index] != DT_UINT8 && dtypes[step.index] != DT_FLOAT) ||
        t.shape.size() != rank) {
      return refuse(
          absl::StrCat("tensor ", step.index, " is ", Describe(t), ", need a uint8 or float32 ",
                       batch_dims_ > 0 ? "batch of images [n, " : "image [",
                       batch_dims_ > 1 ? absl::StrCat("(", batch_dims_, " batch dimensions) ") : "",
                       "height, width, channels]"));
    }
    if (!step.kernel.FitsChannels(t.shape.back())) {
      return refuse(absl::StrCat("tensor ", step.index, " has ", t.shape.back(),
                                 " channels; mean has ", step.kernel.mean_size(),
                                 " values and std ", step.kernel.std_size()));
    }
    dtypes[step.index] = DT_FLOAT;
  }

  std::vector<std::vector<std::string>> strings(in.tensors.size());
  std::vector<ImageTensorSpec> specs;
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    const TensorView& t = in.tensors[i];
    ImageTensorSpec spec{dtypes[i], t.shape, nullptr};
    if (t.dtype == DT_STRING) {
      for (absl::string_view value : t.strings) strings[i].emplace_back(value);
      spec.strings = &strings[i];
    }
    specs.push_back(std::move(spec));
  }
  const ImageLayout layout(specs, in.split_id, in.record);
  if (layout.size() > kMaxElementBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        steps_.back().label, " (run by the trainer): element of split ", in.split_id, " record ",
        in.record, " would be ", layout.size(), " bytes, over the limit of ", kMaxElementBytes));
  }
  ASSIGN_OR_RETURN(BufferRef out, pool->Allocate(layout.size()));
  layout.WriteFraming(out->data());
  std::vector<bool> written(in.tensors.size(), false);
  for (const Step& step : steps_) {
    const TensorView& t = in.tensors[step.index];
    float* const to = reinterpret_cast<float*>(out->data() + layout.content_offset(step.index));
    const int64_t channels = t.shape.back();
    const int64_t pixels = channels == 0 ? 0 : t.num_elements() / channels;
    if (written[step.index]) {
      step.kernel.InPlace(to, pixels, channels);
    } else if (t.dtype == DT_UINT8) {
      step.kernel.FromUint8(t.values<uint8_t>(), pixels, channels, to, /*stream=*/true);
    } else {
      std::memcpy(to, t.data, t.size);
      step.kernel.InPlace(to, pixels, channels);
    }
    written[step.index] = true;
  }
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    if (written[i] || in.tensors[i].dtype == DT_STRING || in.tensors[i].size == 0) continue;
    std::memcpy(out->data() + layout.content_offset(i), in.tensors[i].data, in.tensors[i].size);
  }
  return out;
}

}  // namespace granary
