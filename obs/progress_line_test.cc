#include "obs/progress_line.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace granary {
namespace {

// What a ProgressLine wrote to a memory stream.
class Captured {
 public:
  Captured() : file_(open_memstream(&data_, &size_)) {}
  ~Captured() { free(data_); }
  std::FILE* file() { return file_; }
  std::string Close() {
    std::fclose(file_);
    return std::string(data_, size_);
  }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

TEST(ProgressLineTest, OnATerminalTheLineRewritesItselfAndClearErasesIt) {
  Captured out;
  {
    ProgressLine progress(out.file(), /*tty=*/true);
    const absl::Time t0 = absl::FromUnixSeconds(1000);
    progress.Update("epoch 0: 10%", t0);
    progress.Update("epoch 0: 11%", t0 + absl::Milliseconds(10));  // too soon: skipped
    progress.Update("epoch 0: 50%", t0 + absl::Milliseconds(200));
    progress.Clear();
    progress.Clear();  // nothing drawn any more: nothing written
  }
  EXPECT_EQ(out.Close(), "\repoch 0: 10%\x1b[K\repoch 0: 50%\x1b[K\r\x1b[K");
}

TEST(ProgressLineTest, ElsewherePlainLinesAtMostOnePerPeriod) {
  Captured out;
  {
    ProgressLine progress(out.file(), /*tty=*/false, absl::Seconds(10));
    const absl::Time t0 = absl::Now() + absl::Seconds(10);
    progress.Update("too early", t0 - absl::Seconds(1));
    progress.Update("a", t0);
    progress.Update("b", t0 + absl::Seconds(5));
    progress.Update("c", t0 + absl::Seconds(11));
    progress.Clear();
  }
  EXPECT_EQ(out.Close(), "a\nc\n");
}

}  // namespace
}  // namespace granary
