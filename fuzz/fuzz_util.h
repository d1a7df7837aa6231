// Helpers shared by the fuzz targets (fuzz/*_fuzzer.cc): an in-memory SequentialFile over the
// fuzzer's bytes, and a check that turns a broken contract into a crash the fuzzer reports.
#ifndef GRANARY_FUZZ_FUZZ_UTIL_H_
#define GRANARY_FUZZ_FUZZ_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"

namespace granary::fuzz {

// A SequentialFile reading `data`. Reads return at most `max_read` bytes at a time, so that
// readers' handling of short reads is exercised too.
class StringFile : public SequentialFile {
 public:
  StringFile(std::string data, std::string path, size_t max_read = 1 << 20)
      : data_(std::move(data)), path_(std::move(path)), max_read_(max_read) {}

  absl::StatusOr<size_t> Read(size_t n, char* scratch) override {
    const size_t count = std::min({n, max_read_, data_.size() - pos_});
    if (count > 0) std::memcpy(scratch, data_.data() + pos_, count);
    pos_ += count;
    return count;
  }
  absl::Status Skip(uint64_t n) override {
    pos_ += static_cast<size_t>(std::min<uint64_t>(n, data_.size() - pos_));
    return absl::OkStatus();
  }
  const std::string& path() const override { return path_; }

 private:
  const std::string data_;
  const std::string path_;
  const size_t max_read_;
  size_t pos_ = 0;
};

// Aborts (a finding) when `condition` is false: for contracts the code under test promises,
// beyond "does not crash" (e.g. "an error is never OK with garbage output").
inline void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz contract violated: %s\n", what);
    std::abort();
  }
}

}  // namespace granary::fuzz

#endif  // GRANARY_FUZZ_FUZZ_UTIL_H_
