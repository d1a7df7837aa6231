// normalize: replaces the image at `index` (uint8 or float32 [height, width, channels]) by the
// float32 image (x * scale - mean[c]) / std[c]. params: index (default 0), scale (default
// 1/255), mean and std (number lists, each with one value for all channels or one per channel;
// default [0] and [1]). std entries must be non-zero.
//
// The arithmetic is NormalizeKernel's (pipeline/kernels/normalize_kernel.h), which a trainer's
// client also runs when normalize is the pipeline's trainer-side tail. An output made in its
// batch (pipeline/core/row_destination.h) is written with streaming stores: it is read next by
// the trainer, not by this core.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/core/row_destination.h"
#include "pipeline/core/udf_tensor_access.h"
#include "pipeline/kernels/normalize_kernel.h"
#include "pipeline/spec/udf_declarations.h"
#include "pipeline/udfs/builtin_udfs.h"

namespace granary {
namespace {

constexpr char kName[] = "normalize";

class Normalize : public Udf {
 public:
  Normalize(int64_t index, float scale, std::vector<float> mean, std::vector<float> std)
      : index_(index), kernel_(scale, std::move(mean), std::move(std)) {}

  absl::Status Map(Element& element, const UdfCall& call) const override {
    ASSIGN_OR_RETURN(Tensor * t, MutableImageAt(element, index_, {DT_UINT8, DT_FLOAT}, kName));
    const int64_t channels = t->shape()[2];
    RETURN_IF_ERROR(CheckChannels("mean", kernel_.mean_size(), *t));
    RETURN_IF_ERROR(CheckChannels("std", kernel_.std_size(), *t));
    const int64_t pixels = t->shape()[0] * t->shape()[1];
    if (t->dtype() == DT_UINT8) {
      Tensor out = Tensor::Uninitialized(DT_FLOAT, t->shape());
      float* const to = out.data<float>();
      kernel_.FromUint8(t->data<uint8_t>(), pixels, channels, to,
                        ScopedRowDestinations::IsClaimedDestination(to));
      *t = std::move(out);
    } else {
      kernel_.InPlace(t->data<float>(), pixels, channels);
    }
    return absl::OkStatus();
  }

 private:
  static absl::Status CheckChannels(const char* param, size_t values, const Tensor& image) {
    if (values == 1 || static_cast<int64_t>(values) == image.shape()[2]) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": ", param, " has ", values, " values but the image ", image.DebugString(), " has ",
        image.shape()[2], " channels; give one value or one per channel"));
  }

  const int64_t index_;
  const NormalizeKernel kernel_;
};

}  // namespace

void RegisterNormalizeUdf(UdfRegistry* registry) {
  UdfInfo info = NormalizeUdfDeclaration();
  info.factory = [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
    ASSIGN_OR_RETURN(NormalizeConfig config, ReadNormalizeConfig(p));
    return std::make_unique<Normalize>(config.index, config.scale, std::move(config.mean),
                                       std::move(config.std));
  };
  registry->Register(std::move(info)).IgnoreError();
}

}  // namespace granary
