#include "cache/cache_put.h"

#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/cache_chunk_format.h"
#include "common/deterministic_serialization.h"
#include "common/failpoints.h"
#include "common/history_log.h"
#include "common/status_macros.h"

namespace granary {

namespace {

// 16 random hex digits: a run id no other run of the task shares.
std::string RandomRunId() {
  std::random_device device;
  const uint64_t id = (static_cast<uint64_t>(device()) << 32) ^ device();
  return absl::StrFormat("%016x", id);
}

}  // namespace

CachePut::CachePut(const CachePutOptions& options) : options_(options) {
  if (options_.run_id.empty()) options_.run_id = RandomRunId();
}

CachePut::~CachePut() = default;

std::string CachePut::TemporaryName(int64_t task_id, int64_t generation, int64_t first_index,
                                   const std::string& run_id) {
  return absl::StrCat("t", task_id, "-g", generation, "-i", first_index, "-r", run_id, ".tmp");
}

std::string CachePut::FinalName(int64_t task_id, int64_t generation, int64_t first_index,
                                int64_t num_elements) {
  return absl::StrCat("t", task_id, "-g", generation, "-i", first_index, "-n", num_elements,
                      ".chunk");
}

std::string CachePut::Path(const std::string& name) const {
  return absl::StrCat(options_.dir, "/", name);
}

absl::Status CachePut::StartOnce() {
  if (started_) return absl::OkStatus();
  RETURN_IF_ERROR(options_.env->CreateDirs(options_.dir));
  RETURN_IF_ERROR(DeleteStaleTemporaries());
  started_ = true;
  return absl::OkStatus();
}

absl::Status CachePut::DeleteStaleTemporaries() {
  ASSIGN_OR_RETURN(std::vector<std::string> names, options_.env->GetChildren(options_.dir));
  const std::string prefix = absl::StrCat("t", options_.task_id, "-g");
  for (const std::string& name : names) {
    if (!absl::StartsWith(name, prefix) || !absl::EndsWith(name, ".tmp")) continue;
    const size_t dash = name.find("-i", prefix.size());
    int64_t generation = 0;
    if (dash == std::string::npos ||
        !absl::SimpleAtoi(name.substr(prefix.size(), dash - prefix.size()), &generation) ||
        generation > options_.generation) {
      continue;  // Not ours, or a later generation's (this runner is the stale one).
    }
    const absl::Status deleted = options_.env->DeleteFile(Path(name));
    if (!deleted.ok() && !absl::IsNotFound(deleted)) return deleted;
  }
  return absl::OkStatus();
}

int64_t CachePut::NextIndex() const {
  if (open_ != nullptr) return open_->meta.first_index() + open_->meta.num_elements();
  absl::MutexLock lock(&mu_);
  if (chain_.empty()) return 0;
  const CacheChunk& last = chain_.back()->meta;
  return last.first_index() + last.num_elements();
}

absl::Status CachePut::Append(int64_t index, const Element& element) {
  RETURN_IF_ERROR(StartOnce());
  // Elements continue the chain: 0 on a fresh start, the restored index after Restore.
  const int64_t next = NextIndex();
  if (index != next) {
    return absl::InvalidArgumentError(absl::StrCat("cache task ", options_.task_id, " in ",
                                                   options_.dir, ": element ", index,
                                                   " appended where element ", next,
                                                   " is next"));
  }
  if (open_ == nullptr) {
    auto chunk = std::make_unique<Chunk>();
    chunk->meta.set_task_id(options_.task_id);
    chunk->meta.set_generation(options_.generation);
    chunk->meta.set_first_index(index);
    chunk->temporary =
        Path(TemporaryName(options_.task_id, options_.generation, index, options_.run_id));
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                     options_.env->NewWritableFile(chunk->temporary));
    chunk->writer = std::make_unique<TfRecordWriter>(std::move(file));
    open_ = std::move(chunk);
    open_mac_ = ChunkMac::ForNewChunk(options_.mac_key, options_.task_id, index);
  }
  const std::string record = EncodeCachedElement(index, element);
  RETURN_IF_ERROR(open_->writer->Write(record));
  open_mac_->Add(record);
  open_->meta.set_num_elements(open_->meta.num_elements() + 1);
  if (open_->writer->offset() >= options_.max_chunk_bytes) return Seal();
  RETURN_IF_ERROR(HitFailpoint(kPutMidChunkWrite));
  return absl::OkStatus();
}

absl::Status CachePut::Seal() {
  if (open_ == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(open_->writer->Flush());
  CacheChunk& meta = open_->meta;
  meta.set_mac(open_mac_->Finish());
  open_mac_.reset();
  meta.set_bytes(open_->writer->offset());
  meta.set_path(Path(FinalName(meta.task_id(), meta.generation(), meta.first_index(),
                               meta.num_elements())));
  absl::MutexLock lock(&mu_);
  chain_.push_back(std::move(open_));
  return absl::OkStatus();
}

absl::Status CachePut::Save(StateWriter& writer) {
  RETURN_IF_ERROR(Seal());
  absl::MutexLock lock(&mu_);
  writer.WriteInt("chunks", chain_.size());
  for (size_t i = 0; i < chain_.size(); ++i) {
    writer.WriteBytes(absl::StrCat("chunk.", i), SerializeDeterministically(chain_[i]->meta));
    // The exact temporary (with its run id): a restore commits that file and no other.
    writer.WriteBytes(absl::StrCat("chunk.", i, ".temporary"),
                      chain_[i]->temporary.substr(options_.dir.size() + 1));
  }
  return absl::OkStatus();
}

absl::Status CachePut::Restore(const StateReader& reader) {
  ASSIGN_OR_RETURN(int64_t n, reader.ReadInt("chunks"));
  std::deque<std::unique_ptr<Chunk>> chain;
  for (int64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(std::string bytes, reader.ReadBytes(absl::StrCat("chunk.", i)));
    auto chunk = std::make_unique<Chunk>();
    if (!chunk->meta.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat("cache chunk ", i, " of the saved state does not parse"));
    }
    ASSIGN_OR_RETURN(const std::string temporary,
                     reader.ReadBytes(absl::StrCat("chunk.", i, ".temporary")));
    chunk->temporary = Path(temporary);
    chain.push_back(std::move(chunk));
  }
  RETURN_IF_ERROR(options_.env->CreateDirs(options_.dir));
  // Roll the commit forward: the checkpoint covers these chunks, and they were synced before it
  // was written.
  bool renamed = false;
  for (auto& chunk : chain) {
    const std::string& path = chunk->meta.path();
    if (!options_.env->FileExists(path)) {
      const absl::Status status = options_.env->RenameFile(chunk->temporary, path);
      if (!status.ok() && !options_.env->FileExists(path)) {
        return absl::DataLossError(absl::StrCat("cache chunk ", path,
                                                " of the restored checkpoint is missing (",
                                                status.message(), ")"));
      }
      renamed = true;
    }
    chunk->synced = chunk->committed = true;
  }
  if (renamed) RETURN_IF_ERROR(options_.env->SyncDir(options_.dir));
  RETURN_IF_ERROR(StartOnce());
  absl::MutexLock lock(&mu_);
  chain_ = std::move(chain);
  return absl::OkStatus();
}

int64_t CachePut::sealed() const {
  absl::MutexLock lock(&mu_);
  return chain_.size();
}

absl::Status CachePut::SyncSealed(int64_t n) {
  std::vector<Chunk*> pending;
  {
    absl::MutexLock lock(&mu_);
    for (int64_t i = 0; i < n && i < static_cast<int64_t>(chain_.size()); ++i) {
      if (!chain_[i]->synced) pending.push_back(chain_[i].get());
    }
  }
  // Sealed chunks are touched by this thread only (see the class comment).
  for (Chunk* chunk : pending) {
    RETURN_IF_ERROR(chunk->writer->Sync());
    RETURN_IF_ERROR(chunk->writer->Close());
    chunk->writer.reset();
    chunk->synced = true;
  }
  // The temporaries' directory entries must be durable too: Restore renames them after a crash.
  if (!pending.empty()) RETURN_IF_ERROR(options_.env->SyncDir(options_.dir));
  return absl::OkStatus();
}

absl::Status CachePut::CommitSealed(int64_t n) {
  std::vector<Chunk*> pending;
  {
    absl::MutexLock lock(&mu_);
    for (int64_t i = 0; i < n && i < static_cast<int64_t>(chain_.size()); ++i) {
      if (!chain_[i]->committed) pending.push_back(chain_[i].get());
    }
  }
  if (!pending.empty()) RETURN_IF_ERROR(HitFailpoint(kPutAfterCheckpointBeforeCommit));
  for (Chunk* chunk : pending) {
    if (!chunk->synced) {
      return absl::FailedPreconditionError(
          absl::StrCat("cache chunk ", chunk->temporary, " committed before it was synced"));
    }
    RETURN_IF_ERROR(options_.env->RenameFile(chunk->temporary, chunk->meta.path()));
    chunk->committed = true;
  }
  if (!pending.empty()) RETURN_IF_ERROR(options_.env->SyncDir(options_.dir));
  for (Chunk* chunk : pending) {
    GRANARY_HISTORY_RECORD("cache_commit", "ok", "chunk=", chunk->meta.path());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CacheChunk>> CachePut::Finish() {
  RETURN_IF_ERROR(StartOnce());
  RETURN_IF_ERROR(Seal());
  const int64_t n = sealed();
  RETURN_IF_ERROR(SyncSealed(n));
  RETURN_IF_ERROR(CommitSealed(n));
  std::vector<CacheChunk> chunks;
  absl::MutexLock lock(&mu_);
  for (const auto& chunk : chain_) chunks.push_back(chunk->meta);
  return chunks;
}

}  // namespace granary
