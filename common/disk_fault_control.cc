#include "common/disk_fault_control.h"

#include <cstdlib>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace granary {
namespace {

constexpr std::chrono::milliseconds kRereadInterval(50);

absl::StatusOr<DiskOp> ParseDiskOp(absl::string_view word) {
  if (word == "read") return DiskOp::kRead;
  if (word == "write") return DiskOp::kWrite;
  if (word == "sync") return DiskOp::kSync;
  return absl::InvalidArgumentError(
      absl::StrCat("'", word, "' is not an operation (read, write or sync)"));
}

absl::StatusOr<DiskFault> ParseLine(absl::string_view line) {
  const std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
  DiskFault fault;
  if (words[0] == "eio") {
    fault.kind = DiskFault::Kind::kEio;
    if (words.size() != 3) {
      return absl::InvalidArgumentError("expected 'eio <read|write|sync> <path-prefix>'");
    }
  } else if (words[0] == "stall") {
    fault.kind = DiskFault::Kind::kStall;
    if (words.size() != 4) {
      return absl::InvalidArgumentError(
          "expected 'stall <read|write|sync> <path-prefix> <delay, e.g. 3000ms>'");
    }
    if (!absl::ParseDuration(words[3], &fault.stall) || fault.stall <= absl::ZeroDuration() ||
        fault.stall == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", words[3], "' is not a positive delay (a number and a unit, e.g. 3000ms or 2s)"));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("'", words[0], "' is not a fault (eio or stall)"));
  }
  ASSIGN_OR_RETURN(fault.op, ParseDiskOp(words[1]));
  fault.path_prefix = std::string(words[2]);
  return fault;
}

}  // namespace

absl::string_view DiskOpName(DiskOp op) {
  switch (op) {
    case DiskOp::kRead:
      return "read";
    case DiskOp::kWrite:
      return "write";
    case DiskOp::kSync:
      return "sync";
  }
  return "?";
}

absl::StatusOr<std::vector<DiskFault>> ParseDiskFaults(absl::string_view text,
                                                       absl::string_view file) {
  std::vector<DiskFault> faults;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    absl::StatusOr<DiskFault> fault = ParseLine(line);
    if (!fault.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("disk fault control file ", file, ":", number,
                                                     ": '", line, "': ", fault.status().message()));
    }
    faults.push_back(*std::move(fault));
  }
  return faults;
}

std::string DiskFaultLine(const DiskFault& fault) {
  if (fault.kind == DiskFault::Kind::kEio) {
    return absl::StrCat("eio ", DiskOpName(fault.op), " ", fault.path_prefix);
  }
  return absl::StrCat("stall ", DiskOpName(fault.op), " ", fault.path_prefix, " ",
                      absl::ToInt64Milliseconds(fault.stall), "ms");
}

absl::Status ReplaceDiskFaultControlFile(const std::string& file, absl::string_view text) {
  const std::string temporary = file + ".tmp";
  RETURN_IF_ERROR(WriteStringToFile(Env::Default(), temporary, text, /*sync=*/false));
  return Env::Default()->RenameFile(temporary, file);
}

absl::StatusOr<std::unique_ptr<DiskFaultControl>> DiskFaultControl::Open(std::string control_file) {
  std::unique_ptr<DiskFaultControl> control(new DiskFaultControl(std::move(control_file)));
  ASSIGN_OR_RETURN(std::vector<DiskFault> faults, control->Read());
  absl::MutexLock lock(&control->mu_);
  control->faults_ = std::move(faults);
  control->read_at_ = std::chrono::steady_clock::now();
  return control;
}

absl::StatusOr<std::unique_ptr<DiskFaultControl>> DiskFaultControl::FromEnvironment() {
  const char* file = std::getenv(kDiskFaultsEnvironmentVariable);
  if (file == nullptr || *file == '\0') return nullptr;
  return Open(file);
}

absl::StatusOr<std::vector<DiskFault>> DiskFaultControl::Read() const {
  absl::StatusOr<std::string> text = ReadFileToString(Env::Default(), control_file_);
  if (absl::IsNotFound(text.status())) return std::vector<DiskFault>();
  RETURN_IF_ERROR(text.status());
  return ParseDiskFaults(*text, control_file_);
}

std::vector<DiskFault> DiskFaultControl::Current() {
  absl::MutexLock lock(&mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now - read_at_ >= kRereadInterval) {
    read_at_ = now;
    absl::StatusOr<std::vector<DiskFault>> faults = Read();
    if (faults.ok()) {
      faults_ = *std::move(faults);
    } else {
      LOG_EVERY_N(ERROR, 100) << "keeping the disk faults read before: " << faults.status();
    }
  }
  return faults_;
}

absl::Status DiskFaultControl::Before(DiskOp op, absl::string_view path) {
  bool eio = false;
  for (const DiskFault& fault : Current()) {
    if (fault.op != op || !absl::StartsWith(path, fault.path_prefix)) continue;
    if (fault.kind == DiskFault::Kind::kStall) {
      std::this_thread::sleep_for(absl::ToChronoMilliseconds(fault.stall));
    } else {
      eio = true;
    }
  }
  if (!eio) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      DiskOpName(op), " ", path, ": Input/output error (injected by ", control_file_, ")"));
}

}  // namespace granary
