// Paths tests use. Header-only and test-only (it uses GoogleTest).
//
// ctest sets GRANARY_SOURCE_DIR and GRANARY_BINARY_DIR. Without them (a test binary run by
// hand), the source tree is looked for relative to the working directory (the source tree
// itself or the build directory below it) and then relative to this header's own path
// (absolute in CMake builds), so that tests find their files from wherever they are run.
#ifndef GRANARY_TESTING_TEST_PATHS_H_
#define GRANARY_TESTING_TEST_PATHS_H_

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace granary::testing {
namespace test_paths_internal {

// Where the source tree may be, most trusted first.
inline std::vector<std::string> SourceDirCandidates() {
  std::vector<std::string> candidates;
  if (const char* dir = std::getenv("GRANARY_SOURCE_DIR")) candidates.push_back(dir);
  candidates.push_back(".");
  candidates.push_back("..");
  candidates.push_back("../..");
  const std::string self = __FILE__;  // <source>/testing/test_paths.h
  candidates.push_back(self.substr(0, self.rfind('/') + 1) + "..");
  return candidates;
}

// The first candidate source tree that holds the file `relative`; fails the test if none does.
inline std::string SourceDirWith(const std::string& relative) {
  const std::vector<std::string> candidates = SourceDirCandidates();
  for (const std::string& dir : candidates) {
    if (std::ifstream(dir + "/" + relative).good()) return dir;
  }
  ADD_FAILURE() << relative << " not found in the source tree; set GRANARY_SOURCE_DIR";
  return candidates.front();
}

}  // namespace test_paths_internal

// The root of the source tree.
inline std::string SourceDir() {
  return test_paths_internal::SourceDirWith("testing/test_paths.h");
}

inline std::string BinaryDir() {
  const char* dir = std::getenv("GRANARY_BINARY_DIR");
  return dir != nullptr ? dir : SourceDir() + "/build";
}

// The real TFRecord files written by TensorFlow (tests/testdata/tfrecord/SOURCES.md says where
// each comes from), in the source tree.
inline std::string TfRecordTestDataDir() {
  const std::string data = "tests/testdata/tfrecord";
  return test_paths_internal::SourceDirWith(data + "/SOURCES.md") + "/" + data;
}

}  // namespace granary::testing

#endif  // GRANARY_TESTING_TEST_PATHS_H_
