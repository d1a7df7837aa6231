// ScopedTempDir: a per-test scratch directory. Header-only and test-only (it uses GoogleTest).
#ifndef GRANARY_TESTING_SCOPED_TEMP_DIR_H_
#define GRANARY_TESTING_SCOPED_TEMP_DIR_H_

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace granary::testing {

// A fresh directory under ::testing::TempDir(), removed with its contents on destruction.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string tmpl = ::testing::TempDir();
    if (tmpl.empty() || tmpl.back() != '/') tmpl += '/';
    tmpl += "granary_test_XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << tmpl << ": " << std::strerror(errno);
      return;
    }
    path_ = tmpl;
  }
  ~ScopedTempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string Join(absl::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTING_SCOPED_TEMP_DIR_H_
