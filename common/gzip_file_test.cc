#include "common/gzip_file.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// "hello, granary\n" compressed by `gzip -n -9` (GNU gzip 1.12): a member made by another tool.
const unsigned char kGzipToolMember[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
                                         0x03, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0xd7, 0x51, 0x48,
                                         0x2f, 0x4a, 0xcc, 0x4b, 0x2c, 0xaa, 0xe4, 0x02, 0x00,
                                         0x62, 0x50, 0x03, 0x71, 0x0f, 0x00, 0x00, 0x00};
const char kGzipToolText[] = "hello, granary\n";

std::string GzipToolMember() {
  return std::string(reinterpret_cast<const char*>(kGzipToolMember), sizeof(kGzipToolMember));
}

// An in-memory SequentialFile over `data`.
class StringFile : public SequentialFile {
 public:
  StringFile(std::string path, std::string data) : path_(std::move(path)), data_(std::move(data)) {}

  absl::StatusOr<size_t> Read(size_t n, char* scratch) override {
    n = std::min(n, data_.size() - pos_);
    data_.copy(scratch, n, pos_);
    pos_ += n;
    return n;
  }
  absl::Status Skip(uint64_t n) override {
    pos_ += static_cast<size_t>(std::min<uint64_t>(n, data_.size() - pos_));
    return absl::OkStatus();
  }
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  const std::string data_;
  size_t pos_ = 0;
};

// A SequentialFile whose reads fail.
class FailingFile : public SequentialFile {
 public:
  absl::StatusOr<size_t> Read(size_t, char*) override {
    return absl::UnavailableError("read failing.gz: disk on fire");
  }
  absl::Status Skip(uint64_t) override { return absl::OkStatus(); }
  const std::string& path() const override { return path_; }

 private:
  const std::string path_ = "failing.gz";
};

// What a RecordingFile saw; outlives the file.
struct Recording {
  std::string data;
  // `data` as it was at each Sync / Flush call.
  std::vector<std::string> at_sync;
  std::vector<std::string> at_flush;
  bool closed = false;
};

class RecordingFile : public WritableFile {
 public:
  explicit RecordingFile(Recording* rec) : rec_(rec) {}
  absl::Status Append(absl::string_view data) override {
    rec_->data.append(data.data(), data.size());
    return absl::OkStatus();
  }
  absl::Status Flush() override {
    rec_->at_flush.push_back(rec_->data);
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    rec_->at_sync.push_back(rec_->data);
    return absl::OkStatus();
  }
  absl::Status Close() override {
    rec_->closed = true;
    return absl::OkStatus();
  }
  const std::string& path() const override { return path_; }

 private:
  Recording* const rec_;
  const std::string path_ = "recorded.gz";
};

// Compresses `data` in Appends of `piece` bytes into memory.
std::string Compress(const std::string& data, size_t piece = 1 << 30) {
  Recording rec;
  std::unique_ptr<WritableFile> out = NewGzipOutputFile(std::make_unique<RecordingFile>(&rec));
  for (size_t i = 0; i < data.size(); i += piece) {
    EXPECT_TRUE(out->Append(absl::string_view(data).substr(i, piece)).ok());
  }
  EXPECT_TRUE(out->Close().ok());
  return rec.data;
}

// Decompresses `compressed` (named `path`) with reads of `chunk` bytes, returning what was read
// before the end or an error, and the status that ended reading.
std::pair<std::string, absl::Status> Decompress(const std::string& compressed, size_t chunk = 4096,
                                                const std::string& path = "mem.gz") {
  absl::StatusOr<std::unique_ptr<SequentialFile>> in =
      NewGzipInputFile(std::make_unique<StringFile>(path, compressed));
  if (!in.ok()) return {"", in.status()};
  std::string out;
  std::vector<char> buf(chunk);
  while (true) {
    absl::StatusOr<size_t> n = (*in)->Read(chunk, buf.data());
    if (!n.ok()) return {out, n.status()};
    if (*n == 0) return {out, absl::OkStatus()};
    out.append(buf.data(), *n);
  }
}

std::string RandomBytes(std::mt19937_64& rng, size_t n, bool compressible) {
  std::string s(n, '\0');
  for (char& c : s) {
    c = compressible ? "granary pipeline \n"[rng() % 18] : static_cast<char>(rng());
  }
  return s;
}

TEST(GzipFileTest, RoundTripsThroughFilesForManySizesAndReadChunks) {
  const uint64_t seed = std::random_device()();
  std::mt19937_64 rng(seed);
  testing::ScopedTempDir dir;
  Env* env = Env::Default();
  int index = 0;
  for (size_t size : {size_t{0}, size_t{1}, size_t{1000}, size_t{300000}}) {
    for (bool compressible : {true, false}) {
      const std::string data = RandomBytes(rng, size, compressible);
      const std::string path = dir.Join("f" + std::to_string(index++) + ".gz");
      {
        absl::StatusOr<std::unique_ptr<WritableFile>> raw = env->NewWritableFile(path);
        ASSERT_TRUE(raw.ok()) << raw.status();
        std::unique_ptr<WritableFile> out = NewGzipOutputFile(std::move(*raw));
        EXPECT_EQ(out->path(), path);
        // Uneven appends, with a Sync in the middle.
        ASSERT_TRUE(out->Append(absl::string_view(data).substr(0, size / 3)).ok());
        ASSERT_TRUE(out->Sync().ok());
        ASSERT_TRUE(out->Append(absl::string_view(data).substr(size / 3)).ok());
        ASSERT_TRUE(out->Close().ok());
      }
      for (size_t chunk : {size_t{1}, size_t{7}, size_t{65536}, size_t{1} << 20}) {
        if (chunk == 1 && size > 1000) continue;  // Slow and adds nothing.
        absl::StatusOr<std::unique_ptr<SequentialFile>> raw = env->NewSequentialFile(path);
        ASSERT_TRUE(raw.ok()) << raw.status();
        absl::StatusOr<std::unique_ptr<SequentialFile>> in = NewGzipInputFile(std::move(*raw));
        ASSERT_TRUE(in.ok()) << in.status();
        EXPECT_EQ((*in)->path(), path);
        std::string read;
        std::vector<char> buf(chunk);
        while (true) {
          absl::StatusOr<size_t> n = (*in)->Read(chunk, buf.data());
          ASSERT_TRUE(n.ok()) << n.status() << " seed " << seed;
          if (*n == 0) break;
          read.append(buf.data(), *n);
        }
        EXPECT_EQ(read, data) << "seed " << seed << " size " << size << " compressible "
                              << compressible << " chunk " << chunk;
      }
    }
  }
}

TEST(GzipFileTest, ReadsAMemberMadeByTheGzipTool) {
  const auto [text, status] = Decompress(GzipToolMember());
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(text, kGzipToolText);
}

TEST(GzipFileTest, OutputIsGzipFormat) {
  const std::string compressed = Compress("some data");
  ASSERT_GE(compressed.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(compressed[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(compressed[1]), 0x8b);
  EXPECT_EQ(compressed[2], 8);  // CM = deflate.
}

TEST(GzipFileTest, ConcatenatedMembersReadAsTheConcatenationOfTheirContents) {
  const std::string a = "first member\n";
  const std::string b(100000, 'b');
  // Ours, the gzip tool's, an empty member, ours again.
  const std::string compressed =
      Compress(a) + GzipToolMember() + Compress("") + Compress(b, /*piece=*/777);
  for (size_t chunk : {size_t{3}, size_t{65536}}) {
    const auto [text, status] = Decompress(compressed, chunk);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(text, a + kGzipToolText + b) << "chunk " << chunk;
  }
}

TEST(GzipFileTest, EmptyFileReadsAsEmpty) {
  const auto [text, status] = Decompress("");
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(text, "");
}

TEST(GzipFileTest, SkipDiscardsDecompressedBytes) {
  std::string data;
  for (int i = 0; i < 200000; ++i) data.push_back(static_cast<char>('a' + i % 23));
  absl::StatusOr<std::unique_ptr<SequentialFile>> in =
      NewGzipInputFile(std::make_unique<StringFile>("mem.gz", Compress(data)));
  ASSERT_TRUE(in.ok()) << in.status();
  char buf[10];
  ASSERT_TRUE((*in)->Skip(150001).ok());
  ASSERT_EQ(*(*in)->Read(10, buf), 10u);
  EXPECT_EQ(std::string(buf, 10), data.substr(150001, 10));
  ASSERT_TRUE((*in)->Skip(0).ok());
  ASSERT_EQ(*(*in)->Read(10, buf), 10u);
  EXPECT_EQ(std::string(buf, 10), data.substr(150011, 10));
  // Past the end: stays at the end.
  ASSERT_TRUE((*in)->Skip(1000000).ok());
  EXPECT_EQ(*(*in)->Read(10, buf), 0u);
}

TEST(GzipFileTest, SyncFlushesTheDeflateStreamBeforeSyncingTheInnerFile) {
  const std::string data(50000, 'x');
  Recording rec;
  std::unique_ptr<WritableFile> out = NewGzipOutputFile(std::make_unique<RecordingFile>(&rec));
  ASSERT_TRUE(out->Append(data).ok());
  ASSERT_TRUE(out->Sync().ok());
  ASSERT_EQ(rec.at_sync.size(), 1u);
  // What the inner file held when it was synced decompresses to everything appended; only the
  // trailer is missing, so the reader then reports truncation.
  const auto [text, status] = Decompress(rec.at_sync[0]);
  EXPECT_EQ(text, data);
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("truncated"));
  ASSERT_TRUE(out->Close().ok());
}

TEST(GzipFileTest, FlushMakesAppendedDataDecodable) {
  Recording rec;
  std::unique_ptr<WritableFile> out = NewGzipOutputFile(std::make_unique<RecordingFile>(&rec));
  ASSERT_TRUE(out->Append("flushed").ok());
  ASSERT_TRUE(out->Flush().ok());
  ASSERT_EQ(rec.at_flush.size(), 1u);
  EXPECT_EQ(Decompress(rec.at_flush[0]).first, "flushed");
  ASSERT_TRUE(out->Close().ok());
}

TEST(GzipFileTest, CloseFinishesTheStreamAndClosesTheInnerFile) {
  Recording rec;
  std::unique_ptr<WritableFile> out = NewGzipOutputFile(std::make_unique<RecordingFile>(&rec));
  ASSERT_TRUE(out->Append("abc").ok());
  ASSERT_TRUE(out->Close().ok());
  EXPECT_TRUE(rec.closed);
  const auto [text, status] = Decompress(rec.data);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(text, "abc");
  EXPECT_TRUE(absl::IsFailedPrecondition(out->Append("more")));
  EXPECT_TRUE(absl::IsFailedPrecondition(out->Close()));
}

TEST(GzipFileTest, DestructorClosesAnUnclosedFile) {
  Recording rec;
  {
    std::unique_ptr<WritableFile> out = NewGzipOutputFile(std::make_unique<RecordingFile>(&rec));
    ASSERT_TRUE(out->Append("abc").ok());
  }
  EXPECT_TRUE(rec.closed);
  EXPECT_EQ(Decompress(rec.data).first, "abc");
}

TEST(GzipFileTest, CorruptDataIsDataLossNamingThePath) {
  std::mt19937_64 rng(7);
  std::string compressed = Compress(RandomBytes(rng, 20000, /*compressible=*/true));
  compressed[compressed.size() / 2] ^= 0x55;
  const auto [text, status] = Decompress(compressed, 4096, "/data/corrupt.gz");
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("/data/corrupt.gz"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("compressed offset"));
}

TEST(GzipFileTest, TruncatedStreamIsDataLossNamingThePath) {
  const std::string compressed = Compress(std::string(10000, 'q'));
  const auto [text, status] =
      Decompress(compressed.substr(0, compressed.size() - 5), 4096, "/data/cut.gz");
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("/data/cut.gz"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("truncated"));
}

TEST(GzipFileTest, DataThatIsNotGzipIsDataLoss) {
  const auto [text, status] = Decompress("plain text, not gzip", 4096, "/data/plain.gz");
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("/data/plain.gz"));
}

TEST(GzipFileTest, GarbageAfterAMemberIsDataLoss) {
  const auto [text, status] = Decompress(Compress("ok") + "garbage", 4096, "/data/tail.gz");
  EXPECT_EQ(text, "ok");
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("/data/tail.gz"));
}

TEST(GzipFileTest, ErrorsAreSticky) {
  absl::StatusOr<std::unique_ptr<SequentialFile>> in =
      NewGzipInputFile(std::make_unique<StringFile>("mem.gz", "not gzip at all"));
  ASSERT_TRUE(in.ok()) << in.status();
  char buf[16];
  const absl::Status first = (*in)->Read(sizeof(buf), buf).status();
  ASSERT_TRUE(absl::IsDataLoss(first)) << first;
  EXPECT_EQ((*in)->Read(sizeof(buf), buf).status(), first);
  EXPECT_EQ((*in)->Skip(3), first);
}

TEST(GzipFileTest, InnerReadErrorsArePassedOn) {
  absl::StatusOr<std::unique_ptr<SequentialFile>> in =
      NewGzipInputFile(std::make_unique<FailingFile>());
  ASSERT_TRUE(in.ok()) << in.status();
  char buf[16];
  const absl::Status status = (*in)->Read(sizeof(buf), buf).status();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("disk on fire"));
}

}  // namespace
}  // namespace granary
