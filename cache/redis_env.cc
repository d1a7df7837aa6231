#include "cache/redis_env.h"

#include <fnmatch.h>

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
constexpr char kTlsScheme[] = "rediss://";
constexpr char kDefaultPort[] = "6379";

// `text` with Redis' glob characters escaped, to match literally.
std::string EscapeGlob(absl::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// An authority ("USER:PASSWORD@HOST:PORT") without its user and password, which are never
// repeated in a message.
absl::string_view AfterUserinfo(absl::string_view authority) {
  const size_t at = authority.rfind('@');
  return at == absl::string_view::npos ? authority : authority.substr(at + 1);
}

// Buffers its bytes in blocks (appending never moves what is buffered); Flush, Sync and Close
// SET them as the value, sent block by block.
class RedisWritableFile : public WritableFile {
 public:
  static constexpr size_t kBlock = 4 << 20;

  RedisWritableFile(RedisEnv* env, std::string path) : env_(env), path_(std::move(path)) {}
  ~RedisWritableFile() override {
    if (dirty_) Close().IgnoreError();
  }
  absl::Status Append(absl::string_view data) override {
    while (!data.empty()) {
      if (blocks_.empty() || blocks_.back().size() == kBlock) {
        blocks_.emplace_back();
        // The first block grows as a string does; a file this large has more to come.
        if (blocks_.size() > 1) blocks_.back().reserve(kBlock);
      }
      std::string& block = blocks_.back();
      const size_t n = std::min(data.size(), kBlock - block.size());
      block.append(data.data(), n);
      data.remove_prefix(n);
    }
    dirty_ = true;
    return absl::OkStatus();
  }
  // Redis has no buffer between "given to the OS" and "durable in the tier": Flush SETs too,
  // so a sealed chunk (CachePut flushes it) goes out while the epoch runs, not at its end.
  absl::Status Flush() override { return Sync(); }
  absl::Status Sync() override {
    if (!dirty_) return absl::OkStatus();
    RETURN_IF_ERROR(
        env_->Put(path_, std::vector<absl::string_view>(blocks_.begin(), blocks_.end())));
    dirty_ = false;
    return absl::OkStatus();
  }
  absl::Status Close() override { return Sync(); }
  const std::string& path() const override { return path_; }

 private:
  RedisEnv* const env_;
  const std::string path_;
  std::vector<std::string> blocks_;
  bool dirty_ = false;
};

}  // namespace

// A GET's value, streamed off its connection into the reader's buffer.
class RedisEnv::ValueFile : public SequentialFile {
 public:
  ValueFile(std::string path, std::unique_ptr<RedisNodes::Value> value)
      : path_(std::move(path)), value_(std::move(value)) {}
  absl::StatusOr<size_t> Read(size_t n, char* scratch) override {
    size_t done = 0;
    while (done < n) {
      ASSIGN_OR_RETURN(const size_t got, value_->Read(scratch + done, n - done));
      if (got == 0) break;
      done += got;
    }
    return done;
  }
  absl::Status Skip(uint64_t n) override {
    char buffer[16 << 10];
    while (n > 0) {
      ASSIGN_OR_RETURN(const size_t got, Read(std::min<uint64_t>(n, sizeof(buffer)), buffer));
      if (got == 0) break;
      n -= got;
    }
    return absl::OkStatus();
  }
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  const std::unique_ptr<RedisNodes::Value> value_;
};

std::string RedisServerOf(const std::string& path) {
  size_t authority = 0;
  if (absl::StartsWith(path, kScheme)) {
    authority = sizeof(kScheme) - 1;
  } else if (absl::StartsWith(path, kTlsScheme)) {
    authority = sizeof(kTlsScheme) - 1;
  } else {
    return "";
  }
  const size_t slash = path.find('/', authority);
  return slash == std::string::npos ? path : path.substr(0, slash);
}

absl::StatusOr<std::string> RedisAddressOf(const std::string& server) {
  if (absl::StartsWith(server, kTlsScheme)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache tier rediss://", AfterUserinfo(server.substr(sizeof(kTlsScheme) - 1)),
                     ": rediss:// (Redis over TLS) is not supported (Debian 12's hiredis has no "
                     "TLS); use redis://HOST:PORT/PREFIX on a "
                     "network only Granary's hosts reach (SECURITY.md, \"The Redis cache tier\")"));
  }
  std::string authority = server.substr(sizeof(kScheme) - 1);
  if (authority.find('@') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache tier redis://<elided>@", AfterUserinfo(authority),
        ": a user or password in the URL is not supported (the cache root is journaled, shown by ",
        "`granary status` and sent to every worker); give the password in a file with ",
        "--redis_password_file, and an ACL user with --redis_user"));
  }
  if (authority.find(':') == std::string::npos) absl::StrAppend(&authority, ":", kDefaultPort);
  const size_t colon = authority.rfind(':');
  int port = 0;
  if (colon == 0 || !absl::SimpleAtoi(authority.substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache tier ", server, ": not redis://HOST:PORT (a host, and a port in 1..65535)"));
  }
  return authority;
}

RedisEnv::RedisEnv(std::string server, Env* clock, RedisCredentials credentials)
    : server_(std::move(server)),
      clock_(clock),
      address_(RedisAddressOf(server_)),
      nodes_(address_.value_or(""), std::move(credentials)) {}

RedisEnv::~RedisEnv() = default;

absl::StatusOr<std::string> RedisEnv::KeyOf(const std::string& path) const {
  RETURN_IF_ERROR(address_.status());
  if (!absl::StartsWith(path, server_ + "/") || path.size() == server_.size() + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a path under the cache tier ", server_));
  }
  if (path.find_first_of("{}") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "': the cache tier ", server_, " takes no '{' or '}' in paths"));
  }
  const std::string relative = path.substr(server_.size() + 1);
  const size_t name = relative.rfind('/') + 1;  // 0 without a '/'
  const size_t dash = relative.rfind('-');
  const size_t split = dash != std::string::npos && dash >= name ? dash : relative.size();
  return absl::StrCat("{", relative.substr(0, split), "}", relative.substr(split));
}

std::string RedisEnv::PathOf(const std::string& key) const {
  const size_t close = key.find('}');
  return absl::StrCat(server_, "/", key.substr(1, close - 1), key.substr(close + 1));
}

absl::StatusOr<std::string> RedisEnv::KeysUnder(const std::string& dir) const {
  RETURN_IF_ERROR(KeyOf(dir).status());
  return absl::StrCat("{", EscapeGlob(dir.substr(server_.size() + 1)), "/*");
}

absl::Status RedisEnv::Put(const std::string& path, const std::vector<absl::string_view>& value) {
  ASSIGN_OR_RETURN(const std::string key, KeyOf(path));
  return nodes_.Set(key, value);
}

absl::Status RedisEnv::Put(const std::string& path, absl::string_view value) {
  return Put(path, std::vector<absl::string_view>{value});
}

absl::StatusOr<std::unique_ptr<RedisNodes::Value>> RedisEnv::OpenValue(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string key, KeyOf(path));
  ASSIGN_OR_RETURN(std::unique_ptr<RedisNodes::Value> value, nodes_.Get(key));
  if (value == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": no such value in the cache tier"));
  }
  return value;
}

absl::StatusOr<std::unique_ptr<SequentialFile>> RedisEnv::NewSequentialFile(
    const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RedisNodes::Value> value, OpenValue(path));
  return std::unique_ptr<SequentialFile>(new ValueFile(path, std::move(value)));
}

absl::StatusOr<std::unique_ptr<WritableFile>> RedisEnv::NewWritableFile(const std::string& path) {
  // Created (empty) at once, as a file would be.
  RETURN_IF_ERROR(Put(path, ""));
  return std::unique_ptr<WritableFile>(new RedisWritableFile(this, path));
}

bool RedisEnv::FileExists(const std::string& path) {
  const absl::StatusOr<std::string> key = KeyOf(path);
  if (!key.ok()) return false;
  const absl::StatusOr<RedisReply> r = nodes_.Command(*key, {"EXISTS", *key});
  if (r.ok() && (*r)->integer > 0) return true;
  // A "directory": some key under it.
  const absl::StatusOr<std::string> pattern = KeysUnder(path);
  const absl::StatusOr<std::vector<std::string>> under = nodes_.Scan(*pattern);
  return under.ok() && !under->empty();
}

absl::StatusOr<uint64_t> RedisEnv::GetFileSize(const std::string& path) {
  // Nothing of it read: its connection goes back to the pool.
  ASSIGN_OR_RETURN(const std::unique_ptr<RedisNodes::Value> value, OpenValue(path));
  return value->size();
}

absl::StatusOr<std::vector<std::string>> RedisEnv::Glob(const std::string& pattern) {
  RETURN_IF_ERROR(KeyOf(pattern).status());
  // The keys under the pattern's literal prefix, filtered by the pattern as paths.
  const std::string relative = pattern.substr(server_.size() + 1);
  // (Up to a '/': a key's hash tag closes within the name, at its last '-'.)
  std::string literal = relative.substr(0, relative.find_first_of("*?[\\"));
  literal.resize(literal.rfind('/') + 1);  // npos + 1 == 0
  ASSIGN_OR_RETURN(const std::vector<std::string> keys,
                   nodes_.Scan(absl::StrCat("{", EscapeGlob(literal), "*")));
  std::vector<std::string> paths;
  for (const std::string& key : keys) {
    std::string path = PathOf(key);
    if (fnmatch(pattern.c_str(), path.c_str(), FNM_PATHNAME) == 0) paths.push_back(std::move(path));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

absl::StatusOr<std::vector<std::string>> RedisEnv::GetChildren(const std::string& dir) {
  ASSIGN_OR_RETURN(const std::string pattern, KeysUnder(dir));
  ASSIGN_OR_RETURN(const std::vector<std::string> keys, nodes_.Scan(pattern));
  std::set<std::string> children;
  for (const std::string& key : keys) {
    const std::string rest = PathOf(key).substr(dir.size() + 1);
    children.insert(rest.substr(0, rest.find('/')));
  }
  return std::vector<std::string>(children.begin(), children.end());
}

absl::Status RedisEnv::RenameKey(const std::string& from, const std::string& to) {
  ASSIGN_OR_RETURN(const bool same_slot, nodes_.SameSlot(from, to));
  if (same_slot) {
    const absl::Status renamed = nodes_.Command(from, {"RENAME", from, to}).status();
    // A RENAME resent after a connection failed may find its own work done.
    if (absl::IsInternal(renamed) && absl::StrContains(renamed.message(), "no such key")) {
      ASSIGN_OR_RETURN(const RedisReply from_left, nodes_.Command(from, {"EXISTS", from}));
      ASSIGN_OR_RETURN(const RedisReply to_made, nodes_.Command(to, {"EXISTS", to}));
      if (from_left->integer == 0 && to_made->integer > 0) return absl::OkStatus();
    }
    return renamed;
  }
  ASSIGN_OR_RETURN(const RedisReply value, nodes_.Command(from, {"GET", from}));
  if (value->type != REDIS_REPLY_STRING) {
    return absl::NotFoundError(absl::StrCat("rename ", PathOf(from), ": no such value"));
  }
  RETURN_IF_ERROR(nodes_.Set(to, {absl::string_view(value->str, value->len)}));
  return nodes_.Command(from, {"DEL", from}).status();
}

absl::Status RedisEnv::RenameFile(const std::string& from, const std::string& to) {
  ASSIGN_OR_RETURN(const std::string from_key, KeyOf(from));
  ASSIGN_OR_RETURN(const std::string to_key, KeyOf(to));
  ASSIGN_OR_RETURN(const RedisReply exists, nodes_.Command(from_key, {"EXISTS", from_key}));
  if (exists->integer > 0) return RenameKey(from_key, to_key);
  // A "directory": every key under it.
  ASSIGN_OR_RETURN(const std::string pattern, KeysUnder(from));
  ASSIGN_OR_RETURN(const std::vector<std::string> keys, nodes_.Scan(pattern));
  if (keys.empty()) return absl::NotFoundError(absl::StrCat("rename ", from, ": no such value"));
  for (const std::string& key : keys) {
    ASSIGN_OR_RETURN(const std::string moved, KeyOf(to + PathOf(key).substr(from.size())));
    RETURN_IF_ERROR(RenameKey(key, moved));
  }
  return absl::OkStatus();
}

absl::Status RedisEnv::DeleteFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string key, KeyOf(path));
  ASSIGN_OR_RETURN(const RedisReply r, nodes_.Command(key, {"DEL", key}));
  if (r->integer == 0) return absl::NotFoundError(absl::StrCat("delete ", path, ": no such value"));
  return absl::OkStatus();
}

absl::Status RedisEnv::CreateDirs(const std::string& dir) { return KeyOf(dir).status(); }

absl::Status RedisEnv::DeleteDir(const std::string& dir) {
  // As rmdir: only an empty "directory" (no key under it) goes — and it is gone already.
  ASSIGN_OR_RETURN(const std::string pattern, KeysUnder(dir));
  ASSIGN_OR_RETURN(const std::vector<std::string> keys, nodes_.Scan(pattern));
  if (!keys.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("rmdir ", dir, ": not empty (", keys.size(), " values under it)"));
  }
  return absl::OkStatus();
}

absl::Status RedisEnv::SyncDir(const std::string& dir) { return KeyOf(dir).status(); }

}  // namespace granary
