#include "tools/synthetic_imagenet.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_format.h"
#include "common/deterministic_serialization.h"
#include "common/hash.h"
#include "common/stateless_random.h"
#include "common/status_macros.h"
#include "pipeline/image/image_codec.h"
#include "pipeline/sources/tfrecord_writer.h"
#include "proto/example.pb.h"

namespace granary {
namespace {

// A deterministic image: a two-colour gradient, a few rectangles and a little noise.
Tensor MakeImage(int64_t size, uint64_t key) {
  StatelessRandom rng(key);
  Tensor image(DT_UINT8, {size, size, 3});
  uint8_t* px = image.data<uint8_t>();
  int a[3], b[3];
  for (int c = 0; c < 3; ++c) {
    a[c] = static_cast<int>(rng.Uniform(256));
    b[c] = static_cast<int>(rng.Uniform(256));
  }
  const double angle = rng.UniformDouble() * 6.2831853;
  const double dx = std::cos(angle), dy = std::sin(angle);
  for (int64_t y = 0; y < size; ++y) {
    for (int64_t x = 0; x < size; ++x) {
      // Clamped: (x * dx + y * dy) / size reaches +-sqrt(2), and a colour outside 0..255 does
      // not convert to uint8 (undefined behaviour; found by UBSan).
      const double t = std::clamp(0.5 + 0.5 * ((x * dx + y * dy) / size), 0.0, 1.0);
      for (int c = 0; c < 3; ++c) {
        px[(y * size + x) * 3 + c] = static_cast<uint8_t>(a[c] + (b[c] - a[c]) * t);
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    const int64_t x0 = rng.Uniform(size), y0 = rng.Uniform(size);
    const int64_t w = 1 + rng.Uniform(size / 2), h = 1 + rng.Uniform(size / 2);
    uint8_t color[3];
    for (uint8_t& c : color) c = static_cast<uint8_t>(rng.Uniform(256));
    for (int64_t y = y0; y < std::min(size, y0 + h); ++y) {
      for (int64_t x = x0; x < std::min(size, x0 + w); ++x) {
        for (int c = 0; c < 3; ++c) px[(y * size + x) * 3 + c] = color[c];
      }
    }
  }
  for (int64_t i = 0; i < size * size * 3; ++i) {
    const int v = px[i] + static_cast<int>(rng.Uniform(9)) - 4;
    px[i] = static_cast<uint8_t>(std::clamp(v, 0, 255));
  }
  return image;
}

void SetBytes(tfexample::Features* f, const std::string& key, std::string value) {
  (*f->mutable_feature())[key].mutable_bytes_list()->add_value(std::move(value));
}

void SetInt(tfexample::Features* f, const std::string& key, int64_t value) {
  (*f->mutable_feature())[key].mutable_int64_list()->add_value(value);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> WriteSyntheticImagenet(
    Env* env, const SyntheticImagenetOptions& options) {
  if (options.images < 1 || options.files < 1 || options.size < 8) {
    return absl::InvalidArgumentError(
        "datagen imagenet: need images >= 1, files >= 1 and size >= 8");
  }
  RETURN_IF_ERROR(env->CreateDirs(options.out_dir));
  std::vector<std::string> paths;
  int64_t written = 0;
  for (int64_t f = 0; f < options.files; ++f) {
    const std::string path =
        absl::StrFormat("%s/train-%05d-of-%05d.tfrecord", options.out_dir, f, options.files);
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(path));
    TfRecordWriter writer(std::move(file));
    for (int64_t i = f; i < options.images; i += options.files) {
      const Tensor image = MakeImage(options.size, HashCombine(options.seed, i));
      ASSIGN_OR_RETURN(std::string jpeg, EncodeJpeg(image, options.jpeg_quality));
      tfexample::Example example;
      tfexample::Features* features = example.mutable_features();
      SetBytes(features, "image/encoded", std::move(jpeg));
      SetBytes(features, "image/format", "JPEG");
      SetInt(features, "image/class/label", i % options.num_classes);
      SetInt(features, "image/height", options.size);
      SetInt(features, "image/width", options.size);
      RETURN_IF_ERROR(writer.Write(SerializeDeterministically(example)));
      if (options.progress) options.progress(++written);
    }
    RETURN_IF_ERROR(writer.Sync());
    RETURN_IF_ERROR(writer.Close());
    paths.push_back(path);
  }
  return paths;
}

}  // namespace granary
