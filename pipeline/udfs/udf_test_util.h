// Test-only helpers for the UDF and image codec tests (header-only; include only from
// *_test.cc files): reading the records of the TFRecord fixtures, building a UDF from JSON
// params and running it, and small images to run it on.
#ifndef GRANARY_PIPELINE_UDFS_UDF_TEST_UTIL_H_
#define GRANARY_PIPELINE_UDFS_UDF_TEST_UTIL_H_

#include <png.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "common/compressed_file.h"
#include "common/env.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "pipeline/core/element.h"
#include "pipeline/core/params.h"
#include "pipeline/sources/tfrecord_reader.h"
#include "pipeline/core/udf.h"
#include "proto/example.pb.h"
#include "testing/test_paths.h"

namespace granary {
namespace udf_test {

// The records of the TFRecord fixture `name` in testing::TfRecordTestDataDir(), read (CRCs
// checked) with the production TfRecordReader; a ".gz" file is read as GZIP. Fails the test
// on any error, returning the records read before it.
inline std::vector<std::string> ReadTestRecords(const std::string& name) {
  const std::string path = testing::TfRecordTestDataDir() + "/" + name;
  absl::StatusOr<std::unique_ptr<SequentialFile>> file = OpenMaybeCompressed(
      Env::Default(), path, absl::EndsWith(name, ".gz") ? Compression::kGzip : Compression::kNone);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return {};
  TfRecordReader reader(std::move(*file), path, /*offset=*/0);
  std::vector<std::string> records;
  while (true) {
    std::string record;
    bool end = false;
    const absl::Status status = reader.ReadRecord(&record, &end);
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok() || end) return records;
    records.push_back(std::move(record));
  }
}

inline tfexample::Example ParseExampleProto(const std::string& record) {
  tfexample::Example example;
  EXPECT_TRUE(example.ParseFromString(record));
  return example;
}

// The single bytes value of `key` in `record` (a serialized tf.train.Example).
inline std::string BytesFeature(const std::string& record, const std::string& key) {
  const tfexample::Example example = ParseExampleProto(record);
  auto it = example.features().feature().find(key);
  if (it == example.features().feature().end() || it->second.bytes_list().value_size() != 1) {
    ADD_FAILURE() << "no single bytes feature '" << key << "'";
    return "";
  }
  return it->second.bytes_list().value(0);
}

inline int64_t Int64Feature(const std::string& record, const std::string& key) {
  const tfexample::Example example = ParseExampleProto(record);
  auto it = example.features().feature().find(key);
  if (it == example.features().feature().end() || it->second.int64_list().value_size() != 1) {
    ADD_FAILURE() << "no single int64 feature '" << key << "'";
    return 0;
  }
  return it->second.int64_list().value(0);
}

// The JPEG of the one record of the ImageNet fixture (480x640 RGB).
inline std::string ImagenetJpeg() {
  const std::vector<std::string> records =
      ReadTestRecords("imagenet_inception_train-00000-of-00001.tfrecord");
  EXPECT_EQ(records.size(), 1u);
  return records.empty() ? "" : BytesFeature(records[0], "image/encoded");
}

// Encodes `pixels` (rows of `width` pixels in `format`) as a PNG through libpng.
inline std::string EncodePng(const std::vector<uint8_t>& pixels, int width, int height,
                             png_uint_32 format) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = width;
  png.height = height;
  png.format = format;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&png, nullptr, &size, 0, pixels.data(), 0, nullptr));
  std::string out(size, '\0');
  EXPECT_TRUE(png_image_write_to_memory(&png, out.data(), &size, 0, pixels.data(), 0, nullptr))
      << png.message;
  out.resize(size);
  return out;
}

// The first bytes of a GIF: an image format neither decoder supports.
inline std::string GifBytes() { return std::string("GIF89a\x01\x00\x01\x00\x00\x00\x00", 13); }

inline google::protobuf::Struct Json(const std::string& text) {
  google::protobuf::Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &s).ok()) << text;
  return s;
}

// An element holding `tensors`.
inline Element MakeElement(std::vector<Tensor> tensors) {
  Element element;
  element.tensors = std::move(tensors);
  return element;
}

// One UDF of a registry: the function that registers it (builtin_udfs.h) and its name.
struct RegisteredUdf {
  void (*register_fn)(UdfRegistry*);
  const char* name;
};

// Builds `udf` from the JSON object `params`, as the pipeline builder would (Params::Create,
// the UDF's validate, its factory); its errors say what they rejected.
inline absl::StatusOr<std::unique_ptr<Udf>> MakeUdf(const RegisteredUdf& udf,
                                                    const std::string& params = "{}") {
  UdfRegistry registry;
  udf.register_fn(&registry);
  const std::string name = udf.name;
  const UdfInfo* info = registry.Find(name);
  if (info == nullptr) return absl::NotFoundError("no UDF named " + name);
  absl::StatusOr<Params> p = Params::Create(Json(params), info->params, "udf '" + name + "'");
  if (!p.ok()) return p.status();
  if (const absl::Status valid = info->validate(*p); !valid.ok()) return valid;
  return info->factory(*p);
}

// Builds `udf` from `params` and maps `element` with it under random key `key`: the element it
// leaves, or the error of building the UDF or of the map.
inline absl::StatusOr<Element> RunUdf(const RegisteredUdf& udf, const std::string& params,
                                      Element element, uint64_t key = 0) {
  absl::StatusOr<std::unique_ptr<Udf>> made = MakeUdf(udf, params);
  if (!made.ok()) return made.status();
  UdfCall call;
  call.random_key = key;
  absl::Status status = (*made)->Map(element, call);
  if (!status.ok()) return status;
  return element;
}

// RunUdf that fails the test on error, returning an element without tensors then.
inline Element ApplyUdf(const RegisteredUdf& udf, const std::string& params, Element element,
                        uint64_t key = 0) {
  absl::StatusOr<Element> out = RunUdf(udf, params, std::move(element), key);
  EXPECT_TRUE(out.ok()) << udf.name << " " << params << ": " << out.status();
  return out.ok() ? *std::move(out) : Element();
}

// ApplyUdf on an element of the one tensor `input`: the tensor the UDF leaves in its place
// (an empty Tensor on error).
inline Tensor ApplyUdf(const RegisteredUdf& udf, const std::string& params, Tensor input,
                       uint64_t key = 0) {
  const Element out = ApplyUdf(udf, params, MakeElement({std::move(input)}), key);
  return out.tensors.empty() ? Tensor() : out.tensors[0];
}

// The error of building `udf` from `params` or, if it builds, of mapping `element` with it
// (OK if neither fails).
inline absl::Status UdfError(const RegisteredUdf& udf, const std::string& params, Element element) {
  return RunUdf(udf, params, std::move(element)).status();
}

// A uint8 image [h, w, c] whose value at (y, x, ch) is (y * 31 + x * 7 + ch * 101) % 256, so
// that every window of it is distinguishable.
inline Tensor PatternImage(int64_t h, int64_t w, int64_t c) {
  Tensor t(DT_UINT8, {h, w, c});
  uint8_t* p = t.data<uint8_t>();
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch)
        *p++ = static_cast<uint8_t>((y * 31 + x * 7 + ch * 101) % 256);
    }
  }
  return t;
}

// A smooth RGB image [h, w, 3] (two gradients and a slow wave): JPEG reproduces it closely.
inline Tensor GradientImage(int64_t h, int64_t w) {
  Tensor t(DT_UINT8, {h, w, 3});
  uint8_t* p = t.data<uint8_t>();
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      *p++ = static_cast<uint8_t>(x * 255 / (w - 1));
      *p++ = static_cast<uint8_t>(y * 255 / (h - 1));
      *p++ = static_cast<uint8_t>(128 + 64 * std::sin(0.1 * (x + y)));
    }
  }
  return t;
}

// The mean absolute difference of two uint8 images of one shape (1e9, and a failure, when the
// shapes differ or the images are empty).
inline double MeanAbsDiff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape() || a.num_elements() == 0) return 1e9;
  double sum = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    sum += std::abs(static_cast<int>(a.data<uint8_t>()[i]) - b.data<uint8_t>()[i]);
  }
  return sum / static_cast<double>(a.num_elements());
}

// Value (y, x, ch) of a uint8 or float32 [h, w, c] image, as a double.
inline double At(const Tensor& image, int64_t y, int64_t x, int64_t ch) {
  const int64_t i = (y * image.shape()[1] + x) * image.shape()[2] + ch;
  return image.dtype() == DT_UINT8 ? image.data<uint8_t>()[i] : image.data<float>()[i];
}

// The values of a numeric tensor, in order.
template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

}  // namespace udf_test
}  // namespace granary

#endif  // GRANARY_PIPELINE_UDFS_UDF_TEST_UTIL_H_
