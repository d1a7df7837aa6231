// random_flip: mirrors the image at `index` (uint8 or float32 [height, width, channels])
// left-right with probability `probability` (default 0.5, in [0, 1]). params: index (default 0),
// probability.
//
// Exactly one draw is made from StatelessRandom(call.random_key), whatever the probability: the
// image is flipped when UniformDouble() < probability. The flip is done in place.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/stateless_random.h"
#include "common/status_macros.h"
#include "pipeline/spec/udf_declarations.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/core/udf_tensor_access.h"

namespace granary {
namespace {

constexpr char kName[] = "random_flip";

// Reverses the order of the `width` pixels of N bytes each in every one of `rows` rows. The
// fixed-size memcpys compile to plain loads and stores.
template <size_t N>
void FlipRows(char* data, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    char* a = data + r * width * N;
    char* b = a + (width - 1) * N;
    for (; a < b; a += N, b -= N) {
      char tmp[N];
      std::memcpy(tmp, a, N);
      std::memcpy(a, b, N);
      std::memcpy(b, tmp, N);
    }
  }
}

void FlipRowsAnySize(char* data, int64_t rows, int64_t width, size_t pixel_bytes) {
  for (int64_t r = 0; r < rows; ++r) {
    char* a = data + r * width * pixel_bytes;
    char* b = a + (width - 1) * pixel_bytes;
    for (; a < b; a += pixel_bytes, b -= pixel_bytes) std::swap_ranges(a, a + pixel_bytes, b);
  }
}

void FlipLeftRight(Tensor* image) {
  const int64_t h = image->shape()[0];
  const int64_t w = image->shape()[1];
  if (h == 0 || w < 2) return;
  const size_t pixel_bytes = image->shape()[2] * DtypeSize(image->dtype());
  char* data = image->mutable_bytes();
  switch (pixel_bytes) {
    case 1:  // uint8 gray
      return FlipRows<1>(data, h, w);
    case 3:  // uint8 RGB
      return FlipRows<3>(data, h, w);
    case 4:  // uint8 RGBA, float32 gray
      return FlipRows<4>(data, h, w);
    case 12:  // float32 RGB
      return FlipRows<12>(data, h, w);
    case 16:  // float32 RGBA
      return FlipRows<16>(data, h, w);
    default:
      return FlipRowsAnySize(data, h, w, pixel_bytes);
  }
}

class RandomFlip : public Udf {
 public:
  RandomFlip(int64_t index, double probability) : index_(index), probability_(probability) {}

  absl::Status Map(Element& element, const UdfCall& call) const override {
    ASSIGN_OR_RETURN(Tensor * t, MutableImageAt(element, index_, {DT_UINT8, DT_FLOAT}, kName));
    StatelessRandom rng(call.random_key);
    if (rng.UniformDouble() < probability_) FlipLeftRight(t);
    return absl::OkStatus();
  }

 private:
  const int64_t index_;
  const double probability_;
};

}  // namespace

void RegisterRandomFlipUdf(UdfRegistry* registry) {
  UdfInfo info = RandomFlipUdfDeclaration();
  info.factory = [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
    ASSIGN_OR_RETURN(const RandomFlipConfig config, ReadRandomFlipConfig(p));
    return std::make_unique<RandomFlip>(config.index, config.probability);
  };
  registry->Register(std::move(info)).IgnoreError();
}

}  // namespace granary
