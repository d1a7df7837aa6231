#include "cache/redis_env.h"

#include <sys/time.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "hiredis/hiredis.h"

namespace granary {
namespace {

constexpr char kScheme[] = "redis://";

// `text` with Redis' glob characters escaped, to match literally.
std::string EscapeGlob(absl::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// Buffers its bytes; Sync and Close SET them as the value.
class RedisWritableFile : public WritableFile {
 public:
  RedisWritableFile(RedisEnv* env, std::string path) : env_(env), path_(std::move(path)) {}
  ~RedisWritableFile() override {
    if (dirty_) Close().IgnoreError();
  }
  absl::Status Append(absl::string_view data) override {
    buffer_.append(data.data(), data.size());
    dirty_ = true;
    return absl::OkStatus();
  }
  absl::Status Flush() override { return absl::OkStatus(); }
  absl::Status Sync() override {
    if (!dirty_) return absl::OkStatus();
    RETURN_IF_ERROR(env_->Put(path_, buffer_));
    dirty_ = false;
    return absl::OkStatus();
  }
  absl::Status Close() override { return Sync(); }
  const std::string& path() const override { return path_; }

 private:
  RedisEnv* const env_;
  const std::string path_;
  std::string buffer_;
  bool dirty_ = false;
};

}  // namespace

struct RedisEnv::Reply {
  explicit Reply(redisReply* r) : reply(r) {}
  ~Reply() { freeReplyObject(reply); }
  redisReply* const reply;
};

// A GET's value, read front to back out of hiredis' reply (no copy of the value first).
class RedisEnv::ValueFile : public SequentialFile {
 public:
  ValueFile(std::string path, std::unique_ptr<Reply> value)
      : path_(std::move(path)), value_(std::move(value)) {}
  absl::StatusOr<size_t> Read(size_t n, char* scratch) override {
    const size_t count = std::min(n, size() - offset_);
    std::memcpy(scratch, value_->reply->str + offset_, count);
    offset_ += count;
    return count;
  }
  absl::Status Skip(uint64_t n) override {
    offset_ += std::min<uint64_t>(n, size() - offset_);
    return absl::OkStatus();
  }
  const std::string& path() const override { return path_; }

 private:
  size_t size() const { return value_->reply->len; }

  const std::string path_;
  const std::unique_ptr<Reply> value_;
  size_t offset_ = 0;
};

std::string RedisServerOf(const std::string& path) {
  if (!absl::StartsWith(path, kScheme)) return "";
  const size_t slash = path.find('/', sizeof(kScheme) - 1);
  return slash == std::string::npos ? path : path.substr(0, slash);
}

RedisEnv::RedisEnv(std::string server, Env* clock) : server_(std::move(server)), clock_(clock) {
  const std::string authority = server_.substr(sizeof(kScheme) - 1);
  const size_t colon = authority.rfind(':');
  host_ = colon == std::string::npos ? authority : authority.substr(0, colon);
  if (colon == std::string::npos || !absl::SimpleAtoi(authority.substr(colon + 1), &port_)) {
    port_ = 6379;
  }
}

RedisEnv::~RedisEnv() {
  absl::MutexLock lock(&mu_);
  if (context_ != nullptr) redisFree(context_);
}

absl::StatusOr<std::unique_ptr<RedisEnv::Reply>> RedisEnv::Command(
    const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  absl::MutexLock lock(&mu_);
  if (context_ == nullptr) {
    context_ = redisConnectWithTimeout(host_.c_str(), port_, timeval{5, 0});
    if (context_ == nullptr || context_->err != 0) {
      const std::string why = context_ != nullptr ? context_->errstr : "out of memory";
      if (context_ != nullptr) redisFree(context_);
      context_ = nullptr;
      return absl::UnavailableError(absl::StrCat("cache tier ", server_, ": ", why));
    }
    redisSetTimeout(context_, timeval{30, 0});
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
  if (reply == nullptr) {
    const std::string why = context_->errstr;
    redisFree(context_);
    context_ = nullptr;  // reopened by the next command
    return absl::UnavailableError(absl::StrCat("cache tier ", server_, ": ", args[0], ": ", why));
  }
  auto owned = std::make_unique<Reply>(reply);
  if (reply->type == REDIS_REPLY_ERROR) {
    return absl::InternalError(absl::StrCat("cache tier ", server_, ": ", args[0], ": ",
                                            std::string(reply->str, reply->len)));
  }
  return owned;
}

absl::StatusOr<std::string> RedisEnv::Key(const std::string& path) const {
  if (!absl::StartsWith(path, server_ + "/") || path.size() == server_.size() + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a path under the cache tier ", server_));
  }
  return path.substr(server_.size() + 1);
}

absl::StatusOr<std::vector<std::string>> RedisEnv::Scan(const std::string& pattern) {
  std::set<std::string> keys;
  std::string cursor = "0";
  do {
    ASSIGN_OR_RETURN(std::unique_ptr<Reply> r,
                     Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}));
    if (r->reply->type != REDIS_REPLY_ARRAY || r->reply->elements != 2) {
      return absl::InternalError(absl::StrCat("cache tier ", server_, ": odd SCAN reply"));
    }
    cursor.assign(r->reply->element[0]->str, r->reply->element[0]->len);
    const redisReply* batch = r->reply->element[1];
    for (size_t i = 0; i < batch->elements; ++i) {
      keys.emplace(batch->element[i]->str, batch->element[i]->len);
    }
  } while (cursor != "0");
  return std::vector<std::string>(keys.begin(), keys.end());
}

absl::Status RedisEnv::Put(const std::string& path, const std::string& value) {
  ASSIGN_OR_RETURN(const std::string key, Key(path));
  return Command({"SET", key, value}).status();
}

absl::StatusOr<std::unique_ptr<SequentialFile>> RedisEnv::NewSequentialFile(
    const std::string& path) {
  ASSIGN_OR_RETURN(const std::string key, Key(path));
  ASSIGN_OR_RETURN(std::unique_ptr<Reply> r, Command({"GET", key}));
  if (r->reply->type == REDIS_REPLY_NIL) {
    return absl::NotFoundError(absl::StrCat(path, ": no such value in the cache tier"));
  }
  return std::unique_ptr<SequentialFile>(new ValueFile(path, std::move(r)));
}

absl::StatusOr<std::unique_ptr<WritableFile>> RedisEnv::NewWritableFile(const std::string& path) {
  // Created (empty) at once, as a file would be.
  RETURN_IF_ERROR(Put(path, ""));
  return std::unique_ptr<WritableFile>(new RedisWritableFile(this, path));
}

bool RedisEnv::FileExists(const std::string& path) {
  const absl::StatusOr<std::string> key = Key(path);
  if (!key.ok()) return false;
  const absl::StatusOr<std::unique_ptr<Reply>> r = Command({"EXISTS", *key});
  if (r.ok() && (*r)->reply->integer > 0) return true;
  // A "directory": some key under it.
  const absl::StatusOr<std::vector<std::string>> under = Scan(EscapeGlob(*key) + "/*");
  return under.ok() && !under->empty();
}

absl::StatusOr<uint64_t> RedisEnv::GetFileSize(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string key, Key(path));
  ASSIGN_OR_RETURN(std::unique_ptr<Reply> exists, Command({"EXISTS", key}));
  if (exists->reply->integer == 0) {
    return absl::NotFoundError(absl::StrCat(path, ": no such value in the cache tier"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Reply> r, Command({"STRLEN", key}));
  return static_cast<uint64_t>(r->reply->integer);
}

absl::StatusOr<std::vector<std::string>> RedisEnv::Glob(const std::string& pattern) {
  ASSIGN_OR_RETURN(const std::string key_pattern, Key(pattern));
  ASSIGN_OR_RETURN(std::vector<std::string> keys, Scan(key_pattern));
  for (std::string& key : keys) key = absl::StrCat(server_, "/", key);
  return keys;
}

absl::StatusOr<std::vector<std::string>> RedisEnv::GetChildren(const std::string& dir) {
  ASSIGN_OR_RETURN(const std::string key, Key(dir));
  ASSIGN_OR_RETURN(const std::vector<std::string> keys, Scan(EscapeGlob(key) + "/*"));
  std::set<std::string> children;
  for (const std::string& k : keys) {
    const std::string rest = k.substr(key.size() + 1);
    children.insert(rest.substr(0, rest.find('/')));
  }
  return std::vector<std::string>(children.begin(), children.end());
}

absl::Status RedisEnv::RenameFile(const std::string& from, const std::string& to) {
  ASSIGN_OR_RETURN(const std::string from_key, Key(from));
  ASSIGN_OR_RETURN(const std::string to_key, Key(to));
  ASSIGN_OR_RETURN(std::unique_ptr<Reply> exists, Command({"EXISTS", from_key}));
  if (exists->reply->integer > 0) return Command({"RENAME", from_key, to_key}).status();
  // A "directory": every key under it.
  ASSIGN_OR_RETURN(const std::vector<std::string> keys, Scan(EscapeGlob(from_key) + "/*"));
  if (keys.empty()) return absl::NotFoundError(absl::StrCat("rename ", from, ": no such value"));
  for (const std::string& k : keys) {
    RETURN_IF_ERROR(Command({"RENAME", k, to_key + k.substr(from_key.size())}).status());
  }
  return absl::OkStatus();
}

absl::Status RedisEnv::DeleteFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string key, Key(path));
  ASSIGN_OR_RETURN(std::unique_ptr<Reply> r, Command({"DEL", key}));
  if (r->reply->integer == 0) {
    return absl::NotFoundError(absl::StrCat("delete ", path, ": no such value"));
  }
  return absl::OkStatus();
}

absl::Status RedisEnv::CreateDirs(const std::string& dir) { return Key(dir).status(); }

absl::Status RedisEnv::DeleteDir(const std::string& dir) {
  // As rmdir: only an empty "directory" (no key under it) goes — and it is gone already.
  ASSIGN_OR_RETURN(const std::string key, Key(dir));
  ASSIGN_OR_RETURN(const std::vector<std::string> keys, Scan(EscapeGlob(key) + "/*"));
  if (!keys.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("rmdir ", dir, ": not empty (", keys.size(), " values under it)"));
  }
  return absl::OkStatus();
}

absl::Status RedisEnv::SyncDir(const std::string& dir) { return Key(dir).status(); }

}  // namespace granary
