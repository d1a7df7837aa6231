#include "common/durability_model.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace granary {
namespace {

constexpr uint64_t kBlockBytes = 4096;

// Collapses repeated slashes and drops a trailing one ("a//b/" -> "a/b").
std::string Normalize(const std::string& path) {
  std::string out;
  out.reserve(path.size());
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out.push_back(c);
  }
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// "a/b/c" -> "a/b"; "c" -> ".".
std::string ParentDir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void KeepFirstError(absl::Status* first, const absl::Status& status) {
  if (first->ok() && !status.ok()) *first = status;
}

// Seeded draws; std::mt19937_64's output is fixed by the standard.
class Draws {
 public:
  explicit Draws(uint64_t seed) : engine_(seed) {}
  // Uniform in [0, n].
  uint64_t UpTo(uint64_t n) { return engine_() % (n + 1); }
  bool Coin() { return (engine_() & 1) != 0; }
  char Byte() { return static_cast<char>(engine_() & 0xff); }

 private:
  std::mt19937_64 engine_;
};

}  // namespace

void PowerLossReport::Add(const PowerLossReport& other) {
  files_cut += other.files_cut;
  bytes_dropped += other.bytes_dropped;
  files_garbled += other.files_garbled;
  files_reverted += other.files_reverted;
  creations_undone += other.creations_undone;
  renames_undone += other.renames_undone;
}

std::string PowerLossReport::Describe() const {
  return absl::StrCat("dropped ", bytes_dropped, " bytes of ", files_cut, " files (", files_garbled,
                      " garbled), reverted ", files_reverted, " in-place files, deleted ",
                      creations_undone, " files, undid ", renames_undone, " renames");
}

void DurabilityModel::Created(const std::string& path) {
  const std::string p = Normalize(path);
  files_[p] = FileState{};
  pending_.push_back({DirOp::kCreate, ParentDir(p), p, ""});
}

void DurabilityModel::Truncated(const std::string& path) { files_[Normalize(path)] = FileState{}; }

void DurabilityModel::Synced(const std::string& path, uint64_t length) {
  files_[Normalize(path)] = FileState{length, std::nullopt};
}

void DurabilityModel::SyncedContent(const std::string& path, std::string content) {
  const uint64_t length = content.size();
  files_[Normalize(path)] = FileState{length, std::move(content)};
}

void DurabilityModel::Renamed(const std::string& from, const std::string& to) {
  const std::string f = Normalize(from);
  const std::string t = Normalize(to);
  auto it = files_.find(f);
  if (it != files_.end()) {
    FileState moved = std::move(it->second);
    files_.erase(it);
    files_[t] = std::move(moved);
  } else {
    files_.erase(t);  // an untracked file now lives at `to`
  }
  pending_.push_back({DirOp::kRename, ParentDir(t), t, f});
}

void DurabilityModel::Deleted(const std::string& path) { files_.erase(Normalize(path)); }

void DurabilityModel::DirSynced(const std::string& dir) {
  const std::string synced = Normalize(dir);
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [&](const DirOp& op) { return op.dir == synced; }),
                 pending_.end());
}

absl::StatusOr<PowerLossReport> DurabilityModel::Apply(Env* env,
                                                       std::optional<uint64_t> torn_seed) {
  PowerLossReport report;
  absl::Status first;
  Draws draws(torn_seed.value_or(0));
  const bool torn = torn_seed.has_value();
  // File contents first, at the files' current paths.
  for (const auto& [path, state] : files_) {
    if (!env->FileExists(path)) continue;
    absl::StatusOr<std::string> data = ReadFileToString(env, path);
    if (!data.ok()) {
      KeepFirstError(&first, data.status());
      continue;
    }
    if (state.content.has_value()) {
      if (*data == *state.content || (torn && draws.Coin())) continue;
      KeepFirstError(&first, WriteStringToFile(env, path, *state.content, /*sync=*/true));
      ++report.files_reverted;
      continue;
    }
    if (data->size() <= state.synced) continue;
    const uint64_t tail = data->size() - state.synced;
    const uint64_t kept = torn ? draws.UpTo(tail) : 0;
    const uint64_t length = state.synced + kept;
    data->resize(length);
    const bool garble = torn && kept > 0 && draws.Coin();
    if (!garble && kept == tail) continue;
    if (garble) {
      // The last block of what survives beyond the synced length holds garbage from some point.
      const uint64_t block = std::max(state.synced, (length - 1) / kBlockBytes * kBlockBytes);
      for (uint64_t i = block + draws.UpTo(length - 1 - block); i < length; ++i) {
        (*data)[i] = draws.Byte();
      }
      ++report.files_garbled;
    }
    KeepFirstError(&first, WriteStringToFile(env, path, *data, /*sync=*/true));
    if (kept < tail) {
      ++report.files_cut;
      report.bytes_dropped += static_cast<int64_t>(tail - kept);
    }
  }
  // Then the directory changes, newest first. A file that is already gone is fine.
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (!env->FileExists(it->path)) continue;
    if (it->kind == DirOp::kCreate) {
      KeepFirstError(&first, env->DeleteFile(it->path));
      ++report.creations_undone;
    } else {
      KeepFirstError(&first, env->RenameFile(it->path, it->from));
      ++report.renames_undone;
    }
  }
  files_.clear();
  pending_.clear();
  if (!first.ok()) return first;
  return report;
}

}  // namespace granary
