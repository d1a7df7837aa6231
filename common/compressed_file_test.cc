#include "common/compressed_file.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

TEST(CompressedFileTest, ParsesTensorFlowCompressionNames) {
  EXPECT_EQ(*ParseCompression(""), Compression::kNone);
  EXPECT_EQ(*ParseCompression("GZIP"), Compression::kGzip);
  for (Compression c : {Compression::kNone, Compression::kGzip}) {
    EXPECT_EQ(*ParseCompression(CompressionName(c)), c);
  }
}

TEST(CompressedFileTest, UnknownCompressionIsInvalidArgumentNamingIt) {
  for (const char* name : {"ZLIB", "gzip", "auto"}) {
    const absl::Status status = ParseCompression(name).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << name << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(name));
  }
}

TEST(CompressedFileTest, WhatIsCreatedCompressedReadsBackAndIsCompressedOnDisk) {
  testing::ScopedTempDir dir;
  Env* env = Env::Default();
  const std::string data(10000, 'z');
  for (Compression c : {Compression::kNone, Compression::kGzip}) {
    const std::string path = dir.Join(c == Compression::kGzip ? "f.gz" : "f");
    {
      absl::StatusOr<std::unique_ptr<WritableFile>> out = CreateMaybeCompressed(env, path, c);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_TRUE((*out)->Append(data).ok());
      ASSERT_TRUE((*out)->Close().ok());
    }
    const std::string on_disk = *ReadFileToString(env, path);
    if (c == Compression::kGzip) {
      EXPECT_LT(on_disk.size(), data.size());
      EXPECT_EQ(on_disk.substr(0, 2), "\x1f\x8b");
    } else {
      EXPECT_EQ(on_disk, data);
    }
    absl::StatusOr<std::unique_ptr<SequentialFile>> in = OpenMaybeCompressed(env, path, c);
    ASSERT_TRUE(in.ok()) << in.status();
    std::string read(data.size() + 1, '\0');
    size_t total = 0;
    while (true) {
      absl::StatusOr<size_t> n = (*in)->Read(read.size() - total, read.data() + total);
      ASSERT_TRUE(n.ok()) << n.status();
      if (*n == 0) break;
      total += *n;
    }
    read.resize(total);
    EXPECT_EQ(read, data) << CompressionName(c);
  }
}

TEST(CompressedFileTest, OpeningAMissingFileIsNotFoundNamingIt) {
  testing::ScopedTempDir dir;
  const std::string path = dir.Join("missing.gz");
  const absl::Status status =
      OpenMaybeCompressed(Env::Default(), path, Compression::kGzip).status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
}

}  // namespace
}  // namespace granary
