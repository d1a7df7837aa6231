// Paths tests use. ctest sets GRANARY_SOURCE_DIR and GRANARY_BINARY_DIR; run by hand from the
// repository root, the fallbacks apply.
#ifndef GRANARY_COMMON_TEST_PATHS_H_
#define GRANARY_COMMON_TEST_PATHS_H_

#include <cstdlib>
#include <string>

namespace granary::testing {

inline std::string SourceDir() {
  const char* dir = std::getenv("GRANARY_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

inline std::string BinaryDir() {
  const char* dir = std::getenv("GRANARY_BINARY_DIR");
  return dir != nullptr ? dir : SourceDir() + "/build";
}

// The real TFRecord files written by TensorFlow (shared/testdata/tfrecord/SOURCES.md).
inline std::string TfRecordTestDataDir() { return SourceDir() + "/../shared/testdata/tfrecord"; }

}  // namespace granary::testing

#endif  // GRANARY_COMMON_TEST_PATHS_H_
