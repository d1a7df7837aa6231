#include "checkpoint/checkpoint_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <tuple>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/crc32c.h"
#include "common/failpoints.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace granary {
namespace {

// File layout (checkpoint/FORMAT.md): magic | task_id | generation | index | owner_length |
// state_length | owner | state | masked CRC-32C of everything before it. Integers are 8-byte
// little-endian, the CRC 4-byte little-endian.
constexpr absl::string_view kMagic = "GRNCKPT2";
constexpr size_t kHeaderSize = 8 + 5 * 8;
constexpr size_t kCrcSize = 4;

void PutFixed64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutFixed32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetFixed64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint32_t GetFixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string Encode(int64_t task_id, int64_t generation, int64_t index, absl::string_view owner,
                   absl::string_view state) {
  std::string out;
  out.reserve(kHeaderSize + owner.size() + state.size() + kCrcSize);
  out.append(kMagic.data(), kMagic.size());
  PutFixed64(&out, static_cast<uint64_t>(task_id));
  PutFixed64(&out, static_cast<uint64_t>(generation));
  PutFixed64(&out, static_cast<uint64_t>(index));
  PutFixed64(&out, owner.size());
  PutFixed64(&out, state.size());
  out.append(owner.data(), owner.size());
  out.append(state.data(), state.size());
  PutFixed32(&out, crc32c::Mask(crc32c::Value(out)));
  return out;
}

std::string TaskPrefix(int64_t task_id) { return absl::StrCat("task-", task_id, "-"); }

std::string FileName(int64_t task_id, int64_t index, int64_t generation) {
  return absl::StrFormat("task-%d-idx-%020d-gen-%d.ckpt", task_id, index, generation);
}

// Parses a canonical checkpoint file name; false for anything else (including temporaries).
bool ParseFileName(absl::string_view name, int64_t* task_id, int64_t* index, int64_t* generation) {
  constexpr absl::string_view kSuffix = ".ckpt";
  if (!absl::EndsWith(name, kSuffix)) return false;
  name.remove_suffix(kSuffix.size());
  const std::vector<absl::string_view> parts = absl::StrSplit(name, '-');
  if (parts.size() != 6 || parts[0] != "task" || parts[2] != "idx" || parts[4] != "gen") {
    return false;
  }
  if (!absl::SimpleAtoi(parts[1], task_id) || !absl::SimpleAtoi(parts[3], index) ||
      !absl::SimpleAtoi(parts[5], generation)) {
    return false;
  }
  // Only the canonical spelling (no sign, exact padding) is a checkpoint name.
  return *task_id >= 0 && *index >= 0 && *generation >= 0 &&
         FileName(*task_id, *index, *generation) == absl::StrCat(name, kSuffix);
}

bool IsTemporary(absl::string_view name) { return absl::StrContains(name, ".ckpt.tmp-"); }

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointStore>> CheckpointStore::Open(Env* env,
                                                                       const std::string& dir,
                                                                       CheckpointOptions options) {
  if (options.keep < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint store ", dir, ": keep must be >= 1, got ", options.keep));
  }
  if (dir.empty()) return absl::InvalidArgumentError("checkpoint store: empty directory");
  std::string clean = dir;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  RETURN_IF_ERROR(Annotate(env->CreateDirs(clean), "opening checkpoint store"));
  return std::unique_ptr<CheckpointStore>(new CheckpointStore(env, std::move(clean), options));
}

CheckpointStore::CheckpointStore(Env* env, std::string dir, CheckpointOptions options)
    : env_(env), dir_(std::move(dir)), options_(options) {}

absl::Mutex* CheckpointStore::TaskMutex(int64_t task_id) const {
  absl::MutexLock lock(&map_mu_);
  std::unique_ptr<absl::Mutex>& mu = task_mu_[task_id];
  if (mu == nullptr) mu = std::make_unique<absl::Mutex>();
  return mu.get();
}

absl::StatusOr<CheckpointStore::Listing> CheckpointStore::List(int64_t task_id) const {
  ASSIGN_OR_RETURN(std::vector<std::string> names, env_->GetChildren(dir_));
  const std::string prefix = TaskPrefix(task_id);
  Listing listing;
  for (const std::string& name : names) {
    if (!absl::StartsWith(name, prefix)) continue;
    const std::string path = absl::StrCat(dir_, "/", name);
    Entry entry;
    int64_t parsed_task = -1;
    if (ParseFileName(name, &parsed_task, &entry.index, &entry.generation) &&
        parsed_task == task_id) {
      entry.path = path;
      listing.checkpoints.push_back(std::move(entry));
    } else if (IsTemporary(name)) {
      listing.temporaries.push_back(path);
    } else {
      listing.malformed.push_back(path);
    }
  }
  std::sort(listing.checkpoints.begin(), listing.checkpoints.end(),
            [](const Entry& a, const Entry& b) {
              return std::tie(a.index, a.generation) > std::tie(b.index, b.generation);
            });
  return listing;
}

absl::StatusOr<Checkpoint> DecodeCheckpointFile(absl::string_view data, const std::string& path,
                                                std::string* owner) {
  auto corrupt = [&](absl::string_view problem) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ", problem));
  };
  const size_t magic_bytes = std::min(data.size(), kMagic.size());
  if (data.compare(0, magic_bytes, kMagic.substr(0, magic_bytes)) != 0) {
    return corrupt("bad magic (not a GRNCKPT2 file)");
  }
  if (data.size() < kHeaderSize) {
    return corrupt(absl::StrCat("truncated at byte ", data.size(), " (the header is ", kHeaderSize,
                                " bytes)"));
  }
  const int64_t header_task = static_cast<int64_t>(GetFixed64(data.data() + 8));
  const int64_t header_generation = static_cast<int64_t>(GetFixed64(data.data() + 16));
  const int64_t header_index = static_cast<int64_t>(GetFixed64(data.data() + 24));
  const uint64_t owner_length = GetFixed64(data.data() + 32);
  const uint64_t state_length = GetFixed64(data.data() + 40);
  const uint64_t body = data.size() - kHeaderSize;
  if (owner_length > body || state_length > body - owner_length ||
      body - owner_length - state_length < kCrcSize) {
    return corrupt(absl::StrCat("truncated at byte ", data.size(), " (header says ", owner_length,
                                " owner and ", state_length, " state bytes, so the file should be ",
                                kHeaderSize + owner_length + state_length + kCrcSize, " bytes)"));
  }
  const size_t crc_offset = kHeaderSize + owner_length + state_length;
  if (data.size() != crc_offset + kCrcSize) {
    return corrupt(absl::StrCat(data.size() - crc_offset - kCrcSize,
                                " trailing bytes after the CRC at byte ", crc_offset));
  }
  const uint32_t stored = crc32c::Unmask(GetFixed32(data.data() + crc_offset));
  const uint32_t actual = crc32c::Value(absl::string_view(data.data(), crc_offset));
  if (stored != actual) {
    return corrupt(
        absl::StrFormat("CRC mismatch (stored 0x%08x, computed 0x%08x)", stored, actual));
  }
  if (owner != nullptr) {
    *owner = std::string(data.substr(kHeaderSize, owner_length));
  }
  Checkpoint checkpoint;
  checkpoint.task_id = header_task;
  checkpoint.generation = header_generation;
  checkpoint.index = header_index;
  checkpoint.state = std::string(data.substr(kHeaderSize + owner_length, state_length));
  checkpoint.path = path;
  return checkpoint;
}

absl::StatusOr<Checkpoint> CheckpointStore::Read(const Entry& entry, int64_t task_id) const {
  ASSIGN_OR_RETURN(std::string data, ReadFileToString(env_, entry.path));
  std::string owner;
  ASSIGN_OR_RETURN(Checkpoint checkpoint, DecodeCheckpointFile(data, entry.path, &owner));
  auto corrupt = [&](absl::string_view problem) {
    return absl::DataLossError(absl::StrCat("checkpoint ", entry.path, ": ", problem));
  };
  if (checkpoint.task_id != task_id || checkpoint.index != entry.index ||
      checkpoint.generation != entry.generation) {
    return corrupt(absl::StrCat("header (task ", checkpoint.task_id, ", index ", checkpoint.index,
                                ", generation ", checkpoint.generation,
                                ") disagrees with the file name (task ", task_id, ", index ",
                                entry.index, ", generation ", entry.generation, ")"));
  }
  if (owner != options_.owner) {
    return corrupt(absl::StrCat("written for '", absl::CHexEscape(owner), "', not for '",
                                absl::CHexEscape(options_.owner),
                                "' (another cluster's journal, or a file copied by hand)"));
  }
  return checkpoint;
}

absl::StatusOr<int64_t> CheckpointStore::Write(int64_t task_id, int64_t generation, int64_t index,
                                               absl::string_view state, int64_t keep_at_or_before) {
  const std::string path = absl::StrCat(dir_, "/", FileName(task_id, index, generation));
  if (task_id < 0 || generation < 0 || index < 0) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint task ", task_id, " generation ",
                                                   generation, " index ", index,
                                                   ": task, generation and index must be >= 0"));
  }
  const std::string contents = Encode(task_id, generation, index, options_.owner, state);
  static std::atomic<uint64_t> next_temp{0};
  const std::string temp = absl::StrCat(path, ".tmp-", ::getpid(), "-", next_temp++);
  const std::string context = absl::StrCat("writing checkpoint ", path);

  absl::MutexLock lock(TaskMutex(task_id));
  // Steps 1-3: temporary, fsync, close, rename. On failure, remove the temporary.
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env_->NewWritableFile(temp));
    RETURN_IF_ERROR(file->Append(contents));
    RETURN_IF_ERROR(file->Sync());
    RETURN_IF_ERROR(file->Close());
    RETURN_IF_ERROR(HitFailpoint(kCheckpointAfterWriteBeforeRename));
    return env_->RenameFile(temp, path);
  }();
  if (!status.ok()) {
    if (env_->FileExists(temp)) {
      const absl::Status cleanup = env_->DeleteFile(temp);
      if (!cleanup.ok()) LOG(WARNING) << "Cannot delete checkpoint temporary: " << cleanup;
    }
    return Annotate(status, context);
  }
  // Step 4: make the new name durable.
  RETURN_IF_ERROR(Annotate(env_->SyncDir(dir_), context));
  // Step 5: prune.
  const absl::Status pruned = Prune(task_id, path, keep_at_or_before);
  if (!pruned.ok()) LOG(WARNING) << "Pruning checkpoints of task " << task_id << ": " << pruned;
  return static_cast<int64_t>(contents.size());
}

absl::Status CheckpointStore::Prune(int64_t task_id, const std::string& just_written,
                                    int64_t keep_at_or_before) {
  ASSIGN_OR_RETURN(Listing listing, List(task_id));
  const std::vector<Entry>& newest_first = listing.checkpoints;
  // The newest checkpoint at or before keep_at_or_before, kept whatever its age.
  const auto spared = std::find_if(newest_first.begin(), newest_first.end(),
                                   [&](const Entry& e) { return e.index <= keep_at_or_before; });
  absl::Status first;
  for (auto it = newest_first.begin() + std::min<size_t>(options_.keep, newest_first.size());
       it != newest_first.end(); ++it) {
    if (it == spared || it->path == just_written) continue;
    const absl::Status status = env_->DeleteFile(it->path);
    if (first.ok() && !status.ok() && !absl::IsNotFound(status)) first = status;
  }
  return first;
}

absl::StatusOr<Checkpoint> CheckpointStore::Newest(int64_t task_id, int64_t max_index,
                                                   std::vector<std::string>* skipped) const {
  absl::MutexLock lock(TaskMutex(task_id));
  ASSIGN_OR_RETURN(Listing listing, List(task_id));
  // `why` names the path when it is a Read error, so only the other reasons get it prepended.
  auto skip = [&](const std::string& path, absl::string_view why) {
    LOG(WARNING) << "Skipping " << why;
    if (skipped != nullptr) skipped->push_back(path);
  };
  for (const std::string& path : listing.temporaries) {
    skip(path, absl::StrCat("checkpoint temporary ", path,
                            " (an interrupted or unfinished write): never read"));
  }
  for (const std::string& path : listing.malformed) {
    skip(path, absl::StrCat(path, ": not a checkpoint file name"));
  }
  for (const Entry& entry : listing.checkpoints) {
    if (entry.index > max_index) continue;
    absl::StatusOr<Checkpoint> checkpoint = Read(entry, task_id);
    if (checkpoint.ok()) return checkpoint;
    if (absl::IsNotFound(checkpoint.status())) continue;  // deleted since it was listed
    if (!absl::IsDataLoss(checkpoint.status())) return checkpoint.status();
    skip(entry.path, checkpoint.status().message());
  }
  return absl::NotFoundError(absl::StrCat("no valid checkpoint of task ", task_id,
                                          " with index <= ", max_index, " in ", dir_));
}

absl::Status CheckpointStore::GarbageCollect(int64_t task_id, int64_t acknowledged) {
  absl::MutexLock lock(TaskMutex(task_id));
  ASSIGN_OR_RETURN(Listing listing, List(task_id));
  std::vector<const Entry*> old;  // index <= acknowledged, newest first
  for (const Entry& entry : listing.checkpoints) {
    if (entry.index <= acknowledged) old.push_back(&entry);
  }
  if (old.size() <= 1) return absl::OkStatus();
  size_t keep = old.size();
  for (size_t i = 0; i < old.size(); ++i) {
    absl::StatusOr<Checkpoint> checkpoint = Read(*old[i], task_id);
    if (checkpoint.ok()) {
      keep = i;
      break;
    }
    if (!absl::IsDataLoss(checkpoint.status()) && !absl::IsNotFound(checkpoint.status())) {
      return checkpoint.status();
    }
    LOG(WARNING) << "Garbage-collecting corrupt checkpoint: " << checkpoint.status();
  }
  if (keep == old.size()) {
    LOG(WARNING) << "No checkpoint of task " << task_id << " with index <= " << acknowledged
                 << " verifies; deleting none";
    return absl::OkStatus();
  }
  for (size_t i = 0; i < old.size(); ++i) {
    if (i == keep) continue;
    const absl::Status status = env_->DeleteFile(old[i]->path);
    if (!status.ok() && !absl::IsNotFound(status)) return status;
  }
  return absl::OkStatus();
}

absl::Status CheckpointStore::DeleteAll(int64_t task_id) {
  absl::MutexLock lock(TaskMutex(task_id));
  ASSIGN_OR_RETURN(Listing listing, List(task_id));
  std::vector<std::string> paths = std::move(listing.temporaries);
  for (const Entry& entry : listing.checkpoints) paths.push_back(entry.path);
  if (paths.empty()) return absl::OkStatus();
  for (const std::string& path : paths) {
    const absl::Status status = env_->DeleteFile(path);
    if (!status.ok() && !absl::IsNotFound(status)) return status;
  }
  return Annotate(env_->SyncDir(dir_), absl::StrCat("deleting checkpoints of task ", task_id));
}

}  // namespace granary
