#include "common/sync_ledger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace granary {
namespace {

constexpr char kHeader[] = "granary-sync-ledger 1";

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// A path as one space-free field: C escapes, and a space as "\040".
std::string EscapePath(const std::string& path) {
  return absl::StrReplaceAll(absl::CEscape(path), {{" ", "\\040"}});
}

bool IsHex(absl::string_view s) {
  if (s.size() % 2 != 0) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Applies one event line (without its newline) to `model`; false if it is malformed.
bool ReplayLine(absl::string_view line, DurabilityModel* model) {
  const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
  std::vector<std::string> paths;  // the unescaped path fields
  const auto path_at = [&](size_t i) {
    std::string path;
    if (i >= fields.size() || !absl::CUnescape(fields[i], &path) || path.empty()) return false;
    paths.push_back(std::move(path));
    return true;
  };
  const absl::string_view op = fields[0];
  if (op == "create" || op == "truncate" || op == "delete" || op == "syncdir") {
    if (fields.size() != 2 || !path_at(1)) return false;
    if (op == "create") model->Created(paths[0]);
    if (op == "truncate") model->Truncated(paths[0]);
    if (op == "delete") model->Deleted(paths[0]);
    if (op == "syncdir") model->DirSynced(paths[0]);
    return true;
  }
  if (op == "rename") {
    if (fields.size() != 3 || !path_at(1) || !path_at(2)) return false;
    model->Renamed(paths[0], paths[1]);
    return true;
  }
  if (op == "sync") {
    uint64_t length;
    if (fields.size() != 3 || !absl::SimpleAtoi(fields[1], &length) || !path_at(2)) return false;
    model->Synced(paths[0], length);
    return true;
  }
  if (op == "content") {
    if (fields.size() != 3 || !IsHex(fields[1]) || !path_at(2)) return false;
    model->SyncedContent(paths[0], absl::HexStringToBytes(fields[1]));
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SyncLedger>> SyncLedger::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open sync ledger", path);
  std::unique_ptr<SyncLedger> ledger(new SyncLedger(path, fd));
  struct stat st;
  if (::fstat(fd, &st) != 0) return Errno("stat sync ledger", path);
  if (st.st_size == 0) RETURN_IF_ERROR(ledger->Append(kHeader));
  return ledger;
}

absl::StatusOr<std::unique_ptr<SyncLedger>> SyncLedger::OpenFromEnvironment() {
  const char* path = std::getenv(kSyncLedgerEnvironmentVariable);
  if (path == nullptr || *path == '\0') return nullptr;
  absl::StatusOr<std::unique_ptr<SyncLedger>> ledger = Open(path);
  if (!ledger.ok()) return Annotate(ledger.status(), kSyncLedgerEnvironmentVariable);
  return ledger;
}

SyncLedger::~SyncLedger() { ::close(fd_); }

absl::Status SyncLedger::Append(const std::string& line) {
  const std::string with_newline = line + "\n";
  // One write(2) of a short line to an O_APPEND file: never interleaved with another thread's.
  ssize_t n;
  do {
    n = ::write(fd_, with_newline.data(), with_newline.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Errno("append to sync ledger", path_);
  if (static_cast<size_t>(n) != with_newline.size()) {
    return absl::InternalError(absl::StrCat("append to sync ledger ", path_, ": wrote ", n, " of ",
                                            with_newline.size(), " bytes"));
  }
  return absl::OkStatus();
}

absl::Status SyncLedger::Created(const std::string& path) {
  return Append(absl::StrCat("create ", EscapePath(path)));
}
absl::Status SyncLedger::Truncated(const std::string& path) {
  return Append(absl::StrCat("truncate ", EscapePath(path)));
}
absl::Status SyncLedger::Synced(const std::string& path, uint64_t length) {
  return Append(absl::StrCat("sync ", length, " ", EscapePath(path)));
}
absl::Status SyncLedger::SyncedContent(const std::string& path, const std::string& content) {
  return Append(absl::StrCat("content ", absl::BytesToHexString(content), " ", EscapePath(path)));
}
absl::Status SyncLedger::Renamed(const std::string& from, const std::string& to) {
  return Append(absl::StrCat("rename ", EscapePath(from), " ", EscapePath(to)));
}
absl::Status SyncLedger::Deleted(const std::string& path) {
  return Append(absl::StrCat("delete ", EscapePath(path)));
}
absl::Status SyncLedger::DirSynced(const std::string& dir) {
  return Append(absl::StrCat("syncdir ", EscapePath(dir)));
}

absl::StatusOr<DurabilityModel> ReplaySyncLedgers(const std::vector<std::string>& paths) {
  DurabilityModel model;
  for (const std::string& path : paths) {
    if (!Env::Default()->FileExists(path)) continue;
    ASSIGN_OR_RETURN(const std::string text, ReadFileToString(Env::Default(), path));
    std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
    // The piece after the last newline: empty, or a line its writer did not finish.
    lines.pop_back();
    if (lines.empty() || lines[0] != kHeader) {
      return absl::DataLossError(
          absl::StrCat("sync ledger ", path, ": does not start with \"", kHeader, "\""));
    }
    for (size_t i = 1; i < lines.size(); ++i) {
      if (!ReplayLine(lines[i], &model)) {
        return absl::DataLossError(absl::StrCat("sync ledger ", path, " line ", i + 1,
                                                ": malformed event \"", absl::CEscape(lines[i]),
                                                "\""));
      }
    }
  }
  return model;
}

absl::StatusOr<PowerLossReport> ApplyPowerLoss(const std::vector<std::string>& ledgers,
                                               std::optional<uint64_t> torn_seed) {
  ASSIGN_OR_RETURN(DurabilityModel model, ReplaySyncLedgers(ledgers));
  return model.Apply(Env::Default(), torn_seed);
}

}  // namespace granary
