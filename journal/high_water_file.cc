#include "journal/high_water_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/hash.h"
#include "journal/format.h"

namespace granary {
namespace {

namespace jf = journal_format;

constexpr char kMagic[] = "GRNRYHW1";  // 8 bytes.

absl::Status Errno(absl::string_view what, const std::string& path) {
  const int error = errno;
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(error));
  if (error == ENOSPC || error == EDQUOT) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

std::string EncodeSlot(const HighWater& mark) {
  std::string slot = absl::StrCat(absl::string_view(kMagic, 8), jf::EncodeU64(mark.seq),
                                  jf::EncodeU64(mark.wal_number));
  StreamingHash64 hash(/*seed=*/0);
  hash.Update(slot);
  return slot + jf::EncodeU64(hash.Digest());
}

std::optional<HighWater> DecodeSlot(absl::string_view slot) {
  if (slot.substr(0, 8) != absl::string_view(kMagic, 8)) return std::nullopt;
  StreamingHash64 hash(/*seed=*/0);
  hash.Update(slot.substr(0, 24));
  if (jf::DecodeU64(slot.substr(24, 8)) != hash.Digest()) return std::nullopt;
  return HighWater{jf::DecodeU64(slot.substr(8, 8)), jf::DecodeU64(slot.substr(16, 8))};
}

// Writes all of `bytes` at `offset`.
absl::Status PWriteAll(int fd, absl::string_view bytes, off_t offset, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("write", path);
    }
    bytes.remove_prefix(n);
    offset += n;
  }
  return absl::OkStatus();
}

// The directory of `path` ("." for a bare name).
std::string ParentDir(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash + 1);
}

absl::Status FsyncDir(const std::string& path) {
  const std::string dir = ParentDir(path);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("open directory", dir);
  const int rc = ::fsync(fd);
  absl::Status status = rc == 0 ? absl::OkStatus() : Errno("fsync directory", dir);
  ::close(fd);
  return status;
}

}  // namespace

absl::StatusOr<std::optional<HighWater>> HighWaterFile::Read(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    return Errno("open", path);
  }
  char buffer[kFileSize + 1];
  ssize_t n;
  do {
    n = ::pread(fd, buffer, sizeof(buffer), 0);
  } while (n < 0 && errno == EINTR);
  const absl::Status read_error = n < 0 ? Errno("read", path) : absl::OkStatus();
  ::close(fd);
  if (!read_error.ok()) return read_error;
  if (n != kFileSize) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", n, " bytes, expected ", kFileSize, " (truncated or damaged)"));
  }
  std::optional<HighWater> best;
  for (int slot = 0; slot < 2; ++slot) {
    std::optional<HighWater> mark =
        DecodeSlot(absl::string_view(buffer + slot * kSlotSize, kSlotSize));
    if (mark.has_value() && (!best.has_value() || mark->seq > best->seq)) best = mark;
  }
  if (!best.has_value()) {
    return absl::DataLossError(absl::StrCat(path, ": damaged (neither slot verifies)"));
  }
  return best;
}

absl::StatusOr<std::unique_ptr<HighWaterFile>> HighWaterFile::Anchor(const std::string& path,
                                                                     const HighWater& mark,
                                                                     SyncLedger* ledger) {
  const std::string both = EncodeSlot(mark) + EncodeSlot(mark);
  // Records an event in `ledger`, if any.
  const auto record = [ledger](const auto& event) {
    return ledger == nullptr ? absl::OkStatus() : event(*ledger);
  };
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && st.st_size == kFileSize) {
    // In place: the blocks exist, so this needs no free space.
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return Errno("open", path);
    std::unique_ptr<HighWaterFile> file(new HighWaterFile(path, fd, both, ledger));
    if (absl::Status s = PWriteAll(fd, both, 0, path); !s.ok()) return s;
    if (::fdatasync(fd) != 0) return Errno("fdatasync", path);
    if (absl::Status s = record([&](SyncLedger& l) { return l.SyncedContent(path, both); });
        !s.ok()) {
      return s;
    }
    return file;
  }
  const std::string tmp = path + ".tmp";
  absl::Status status = record([&](SyncLedger& l) { return l.Created(tmp); });
  if (!status.ok()) return status;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("create", tmp);
  status = PWriteAll(fd, both, 0, tmp);
  if (status.ok() && ::fsync(fd) != 0) status = Errno("fsync", tmp);
  if (status.ok()) status = record([&](SyncLedger& l) { return l.SyncedContent(tmp, both); });
  ::close(fd);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) status = Errno("rename to", path);
  if (status.ok()) status = record([&](SyncLedger& l) { return l.Renamed(tmp, path); });
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  if (absl::Status s = FsyncDir(path); !s.ok()) return s;
  if (absl::Status s = record([&](SyncLedger& l) { return l.DirSynced(ParentDir(path)); });
      !s.ok()) {
    return s;
  }
  fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Errno("open", path);
  return std::unique_ptr<HighWaterFile>(new HighWaterFile(path, fd, both, ledger));
}

HighWaterFile::~HighWaterFile() { ::close(fd_); }

absl::Status HighWaterFile::Update(const HighWater& mark, bool sync) {
  // The slot written last holds the newest mark; overwrite the other one.
  const std::string slot = EncodeSlot(mark);
  if (absl::Status s = PWriteAll(fd_, slot, next_slot_ * kSlotSize, path_); !s.ok()) return s;
  content_.replace(next_slot_ * kSlotSize, kSlotSize, slot);
  next_slot_ = 1 - next_slot_;
  if (!sync) return absl::OkStatus();
  if (::fdatasync(fd_) != 0) return Errno("fdatasync", path_);
  return ledger_ == nullptr ? absl::OkStatus() : ledger_->SyncedContent(path_, content_);
}

bool HighWaterFile::Unlinked() const {
  struct stat st;
  return ::fstat(fd_, &st) == 0 && st.st_nlink == 0;
}

}  // namespace granary
