// Test-only helpers for the UDF and image codec tests (header-only; include only from
// *_test.cc files): locating the TFRecord fixtures, reading their records without depending on
// the production TFRecord reader, and building a UDF from JSON params.
#ifndef GRANARY_PIPELINE_UDF_TEST_UTIL_H_
#define GRANARY_PIPELINE_UDF_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "pipeline/element.h"
#include "pipeline/params.h"
#include "pipeline/udf.h"
#include "proto/example.pb.h"

namespace granary {
namespace udf_test {

// The directory of the TFRecord fixtures (/work/shared/testdata/tfrecord): found through
// $GRANARY_SOURCE_DIR (set by ctest), else relative to the working directory (the source or
// the build directory), else relative to this header's path.
inline std::string TestdataDir() {
  std::vector<std::string> candidates;
  if (const char* source = std::getenv("GRANARY_SOURCE_DIR")) {
    candidates.push_back(std::string(source) + "/../shared/testdata/tfrecord");
  }
  candidates.push_back("../shared/testdata/tfrecord");
  candidates.push_back("../../shared/testdata/tfrecord");
  // Beside the source tree, as seen from this header's own path (absolute in CMake builds).
  const std::string self = __FILE__;
  candidates.push_back(self.substr(0, self.rfind('/') + 1) + "../../shared/testdata/tfrecord");
  for (const std::string& dir : candidates) {
    if (std::ifstream(dir + "/SOURCES.md").good()) return dir;
  }
  ADD_FAILURE() << "TFRecord fixtures not found; set GRANARY_SOURCE_DIR";
  return candidates.front();
}

inline std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The records of the TFRecord file `name` in TestdataDir(). Framing: uint64 LE length, 4-byte
// length CRC, data, 4-byte data CRC; the CRCs are not checked here.
inline std::vector<std::string> ReadTestRecords(const std::string& name) {
  const std::string data = ReadFileOrDie(TestdataDir() + "/" + name);
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < data.size()) {
    uint64_t length = 0;
    if (data.size() - pos < 12) break;
    for (int i = 0; i < 8; ++i) length |= uint64_t{static_cast<uint8_t>(data[pos + i])} << (8 * i);
    if (data.size() - pos - 12 < length + 4) break;
    records.push_back(data.substr(pos + 12, length));
    pos += 16 + length;
  }
  EXPECT_EQ(pos, data.size()) << name << ": trailing bytes after the last record";
  return records;
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

inline google::protobuf::Struct Json(const std::string& text) {
  google::protobuf::Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &s).ok()) << text;
  return s;
}

// Builds UDF `name` (registered by `register_fn`) from the JSON object `params`, as the
// pipeline builder would; its errors say what the factory or Params::Create rejected.
inline absl::StatusOr<std::unique_ptr<Udf>> MakeUdf(void (*register_fn)(UdfRegistry*),
                                                    const std::string& name,
                                                    const std::string& params = "{}") {
  UdfRegistry registry;
  register_fn(&registry);
  const UdfInfo* info = registry.Find(name);
  if (info == nullptr) return absl::NotFoundError("no UDF named " + name);
  absl::StatusOr<Params> p = Params::Create(Json(params), info->params, "udf '" + name + "'");
  if (!p.ok()) return p.status();
  return info->factory(*p);
}

// An element holding `tensors`.
inline Element MakeElement(std::vector<Tensor> tensors) {
  Element element;
  element.tensors = std::move(tensors);
  return element;
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

// Value (y, x, ch) of a uint8 or float32 [h, w, c] image, as a double.
inline double At(const Tensor& image, int64_t y, int64_t x, int64_t ch) {
  const int64_t i = (y * image.shape()[1] + x) * image.shape()[2] + ch;
  return image.dtype() == DT_UINT8 ? image.data<uint8_t>()[i] : image.data<float>()[i];
}

}  // namespace udf_test
}  // namespace granary

#endif  // GRANARY_PIPELINE_UDF_TEST_UTIL_H_
