#include "cache/redis_nodes.h"

#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "hiredis/hiredis.h"

namespace granary {
namespace {

// Idle connections kept per node; more are closed when given back.
constexpr size_t kMaxIdlePerNode = 16;
// The pause before retrying a cluster that is resharding, failing over or unreachable.
constexpr absl::Duration kRetryPause = absl::Milliseconds(100);
// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), Redis Cluster's key hash.
uint16_t Crc16(absl::string_view data) {
  uint16_t crc = 0;
  for (const char c : data) {
    crc ^= static_cast<uint16_t>(static_cast<unsigned char>(c)) << 8;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

std::string Text(const redisReply* reply) { return std::string(reply->str, reply->len); }

// "HOST" of "HOST:PORT": a node that names its own host empty in CLUSTER SLOTS or a redirect
// (cluster-preferred-endpoint-type unknown-endpoint) means "the node you asked".
std::string HostOf(const std::string& node) { return node.substr(0, node.rfind(':')); }

// An error reply's text as an Attempt returns it: never "" (which means OK).
std::string ErrorText(std::string text) { return text.empty() ? "(an empty error)" : text; }

// A redirect reply, "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>".
struct Redirect {
  bool ask = false;
  int slot = 0;
  std::string node;
};
bool ParseRedirect(const std::string& error, Redirect* redirect) {
  const std::vector<std::string> parts = absl::StrSplit(error, ' ');
  if (parts.size() != 3 || (parts[0] != "MOVED" && parts[0] != "ASK")) return false;
  redirect->ask = parts[0] == "ASK";
  redirect->node = parts[2];
  if (redirect->node.empty()) return false;
  return absl::SimpleAtoi(parts[1], &redirect->slot) && redirect->slot >= 0 &&
         redirect->slot < RedisNodes::kSlots;
}

}  // namespace

int RedisNodes::SlotOf(absl::string_view key) {
  const size_t open = key.find('{');
  if (open != absl::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != absl::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) % kSlots;
}

RedisNodes::RedisNodes(std::string seed, RedisCredentials credentials)
    : seed_(std::move(seed)), credentials_(std::move(credentials)) {}

RedisNodes::~RedisNodes() = default;

RedisNodes::Value::~Value() { nodes_->GiveBack(std::move(connection_)); }

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisNodes::Borrow(const std::string& node,
                                                                    bool* pooled) {
  if (pooled != nullptr) *pooled = false;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::unique_ptr<RedisConnection>>& idle = idle_[node];
    if (!idle.empty()) {
      std::unique_ptr<RedisConnection> connection = std::move(idle.back());
      idle.pop_back();
      if (pooled != nullptr) *pooled = true;
      return connection;
    }
  }
  return RedisConnection::Open(node, credentials_);
}

void RedisNodes::DropIdle(const std::string& node) {
  absl::MutexLock lock(&mu_);
  idle_.erase(node);
}

void RedisNodes::GiveBack(std::unique_ptr<RedisConnection> connection) {
  if (connection == nullptr || !connection->healthy()) return;
  absl::MutexLock lock(&mu_);
  std::vector<std::unique_ptr<RedisConnection>>& idle = idle_[connection->address()];
  if (idle.size() < kMaxIdlePerNode) idle.push_back(std::move(connection));
}

absl::Status RedisNodes::DiscoverOnce() {
  {
    absl::MutexLock lock(&mu_);
    if (discovered_) return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> connection, Borrow(seed_));
  ASSIGN_OR_RETURN(const RedisReply info, connection->Command({"INFO", "cluster"}));
  GiveBack(std::move(connection));
  // A server without the section (or with INFO renamed away) is not a cluster node.
  const bool cluster =
      info->type == REDIS_REPLY_STRING && absl::StrContains(Text(info.get()), "cluster_enabled:1");
  if (cluster) RETURN_IF_ERROR(RefreshSlots({seed_}));
  absl::MutexLock lock(&mu_);
  cluster_ = cluster;
  discovered_ = true;
  return absl::OkStatus();
}

absl::Status RedisNodes::RefreshSlots(std::vector<std::string> candidates) {
  for (const std::string& node : Masters()) candidates.push_back(node);
  candidates.push_back(seed_);
  absl::Status last = absl::UnavailableError("no node to ask");
  for (const std::string& node : candidates) {
    absl::StatusOr<std::unique_ptr<RedisConnection>> connection = Borrow(node);
    if (!connection.ok()) {
      last = connection.status();
      continue;
    }
    absl::StatusOr<RedisReply> slots = (*connection)->Command({"CLUSTER", "SLOTS"});
    GiveBack(*std::move(connection));
    if (!slots.ok()) {
      last = slots.status();
      continue;
    }
    const redisReply* ranges = slots->get();
    if (ranges->type != REDIS_REPLY_ARRAY) {
      last = absl::InternalError(absl::StrCat(
          "redis://", node, ": CLUSTER SLOTS: ",
          ranges->type == REDIS_REPLY_ERROR ? Text(ranges) : std::string("not an array")));
      continue;
    }
    std::vector<std::string> slot_node(kSlots);
    for (size_t i = 0; i < ranges->elements; ++i) {
      const redisReply* range = ranges->element[i];
      if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
          range->element[2]->type != REDIS_REPLY_ARRAY || range->element[2]->elements < 2) {
        continue;
      }
      const redisReply* master = range->element[2];
      const std::string master_host =
          master->element[0]->len > 0 ? Text(master->element[0]) : HostOf(node);
      const std::string address = absl::StrCat(master_host, ":", master->element[1]->integer);
      for (long long slot = range->element[0]->integer;
           slot <= range->element[1]->integer && slot < kSlots; ++slot) {
        if (slot >= 0) slot_node[slot] = address;
      }
    }
    absl::MutexLock lock(&mu_);
    slot_node_ = std::move(slot_node);
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat("no node of the Redis Cluster of redis://", seed_,
                                             " told its slot map (", last.message(), ")"));
}

std::string RedisNodes::NodeOf(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  if (!cluster_) return seed_;
  return slot_node_[SlotOf(key)];
}

std::vector<std::string> RedisNodes::Masters() {
  absl::MutexLock lock(&mu_);
  if (!cluster_) return {seed_};
  const std::set<std::string> masters(slot_node_.begin(), slot_node_.end());
  std::vector<std::string> out;
  for (const std::string& node : masters) {
    if (!node.empty()) out.push_back(node);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisNodes::Route(absl::string_view what,
                                                                   absl::string_view key,
                                                                   const Attempt& attempt,
                                                                   const std::string& at,
                                                                   bool* asked) {
  RETURN_IF_ERROR(DiscoverOnce());
  bool cluster = false;
  {
    absl::MutexLock lock(&mu_);
    cluster = cluster_;
  }
  absl::Status last;
  std::string ask_node;  // set: the next attempt goes there, after ASKING
  bool pause = false;    // before the next attempt
  const absl::Time busy_until = absl::Now() + kBusyWait;
  for (int i = 0; i < kMaxAttempts; ++i) {
    if (std::exchange(pause, false)) absl::SleepFor(kRetryPause);
    const bool asking = !ask_node.empty();
    const std::string node = asking ? std::exchange(ask_node, "") : !at.empty() ? at : NodeOf(key);
    if (node.empty()) {
      last = absl::UnavailableError(absl::StrCat("no node of the Redis Cluster of redis://", seed_,
                                                 " serves slot ", SlotOf(key)));
      RefreshSlots({}).IgnoreError();
      pause = true;
      if (absl::Now() < busy_until) i = -1;
      continue;
    }
    bool pooled = false;
    absl::StatusOr<std::unique_ptr<RedisConnection>> connection = Borrow(node, &pooled);
    absl::StatusOr<std::string> error = std::string();
    if (!connection.ok()) {
      error = connection.status();
    } else if (asking) {
      const absl::StatusOr<RedisReply> asking_reply = (*connection)->Command({"ASKING"});
      if (!asking_reply.ok()) error = asking_reply.status();
    }
    if (error.ok()) error = attempt(**connection, asking);
    if (!error.ok()) {  // unreachable, or the connection failed (it is dropped, not given back)
      last = error.status();
      if (pooled) {  // perhaps closed while idle, as its siblings then are: a new one decides
        DropIdle(node);
        --i;
        continue;
      }
      // Refused credentials are not waited out; a pinned call (SCAN) is retried by its caller.
      if (!cluster || !at.empty() || !absl::IsUnavailable(last)) return last;
      RefreshSlots({}).IgnoreError();
      pause = true;
      if (absl::Now() < busy_until) i = -1;  // a failover in progress: wait it out
      continue;
    }
    if (error->empty()) {
      if (asked != nullptr) *asked = asking;
      return *std::move(connection);
    }
    GiveBack(*std::move(connection));
    Redirect redirect;
    if (cluster && ParseRedirect(*error, &redirect)) {
      if (redirect.node[0] == ':') redirect.node = HostOf(node) + redirect.node;
      last = absl::InternalError(absl::StrCat("redis://", node, ": ", what, ": ", *error));
      if (redirect.ask) {
        ask_node = redirect.node;
      } else {
        {
          absl::MutexLock lock(&mu_);
          slot_node_[redirect.slot] = redirect.node;
        }
        RefreshSlots({redirect.node}).IgnoreError();
      }
      continue;
    }
    if (cluster &&
        (absl::StartsWith(*error, "TRYAGAIN") || absl::StartsWith(*error, "CLUSTERDOWN"))) {
      last = absl::UnavailableError(absl::StrCat("redis://", node, ": ", what, ": ", *error));
      pause = true;
      if (absl::Now() < busy_until) i = -1;  // a reshard or failover in progress: wait it out
      continue;
    }
    // An ACL user's forbidden command or key (NOPERM) is the operator's to grant.
    return absl::Status(absl::StartsWith(*error, "NOPERM") ? absl::StatusCode::kPermissionDenied
                                                           : absl::StatusCode::kInternal,
                        absl::StrCat("redis://", node, ": ", what, ": ", *error));
  }
  return absl::Status(last.code(),
                      absl::StrCat(last.message(), " (after ", kMaxAttempts, " attempts)"));
}

absl::StatusOr<RedisReply> RedisNodes::RoutedReply(absl::string_view what, absl::string_view key,
                                                   const Send& send) {
  RedisReply reply;
  ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> connection,
                   Route(what, key, [&](RedisConnection& c, bool) -> absl::StatusOr<std::string> {
                     ASSIGN_OR_RETURN(reply, send(c));
                     if (reply->type != REDIS_REPLY_ERROR) return std::string();
                     return ErrorText(Text(reply.get()));
                   }));
  GiveBack(std::move(connection));
  return reply;
}

absl::StatusOr<RedisReply> RedisNodes::Command(absl::string_view key,
                                               const std::vector<std::string>& args) {
  return RoutedReply(args[0], key, [&](RedisConnection& c) { return c.Command(args); });
}

absl::Status RedisNodes::Set(const std::string& key, const std::vector<absl::string_view>& value) {
  return RoutedReply("SET", key,
                     [&](RedisConnection& c) {
                       return c.CommandWithPieces({"SET", key}, value);
                     })
      .status();
}

absl::StatusOr<std::unique_ptr<RedisNodes::Value>> RedisNodes::Get(const std::string& key) {
  bool exists = false;
  uint64_t size = 0;
  bool asked = false;
  const Attempt length = [&](RedisConnection& c, bool asking) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(const RedisReply strlen, c.Command({"STRLEN", key}));
    if (strlen->type == REDIS_REPLY_ERROR) return ErrorText(Text(strlen.get()));
    size = static_cast<uint64_t>(strlen->integer);
    exists = size > 0;
    if (!exists) {  // empty, or no such key
      if (asking) RETURN_IF_ERROR(c.Command({"ASKING"}).status());
      ASSIGN_OR_RETURN(const RedisReply found, c.Command({"EXISTS", key}));
      if (found->type == REDIS_REPLY_ERROR) return ErrorText(Text(found.get()));
      exists = found->integer > 0;
    }
    return std::string();
  };
  ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> connection,
                   Route("GET", key, length, "", &asked));
  if (!exists) {
    GiveBack(std::move(connection));
    return nullptr;
  }
  return std::unique_ptr<Value>(new Value(this, std::move(connection), key, size, asked));
}

absl::Status RedisNodes::Value::RequestPieces() {
  while (requested_ < size_ && requested_ - read_ < kWindow * kPiece) {
    const uint64_t end = std::min(requested_ + kPiece, size_);
    if (asking_) RETURN_IF_ERROR(connection_->SendCommand({"ASKING"}));
    RETURN_IF_ERROR(connection_->SendCommand(
        {"GETRANGE", key_, absl::StrCat(requested_), absl::StrCat(end - 1)}));
    requested_ = end;
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> RedisNodes::Value::Read(char* dst, size_t n) {
  if (!failed_.ok()) return failed_;
  absl::StatusOr<size_t> got = ReadOnce(dst, n);
  if (!got.ok()) failed_ = got.status();
  return got;
}

absl::StatusOr<size_t> RedisNodes::Value::ReadOnce(char* dst, size_t n) {
  if (read_ == size_ || n == 0) return 0;
  if (read_ == piece_end_) {  // the next piece
    RETURN_IF_ERROR(RequestPieces());
    if (asking_) RETURN_IF_ERROR(connection_->ReadReplyStart().status());
    ASSIGN_OR_RETURN(const RedisConnection::ReplyStart start, connection_->ReadReplyStart());
    const uint64_t expected = std::min(kPiece, size_ - read_);
    if (start.kind != RedisConnection::ReplyStart::kBulk || start.length != expected) {
      return absl::UnavailableError(
          absl::StrCat("redis://", connection_->address(), ": the value of ", key_,
                       " changed while it was read (GETRANGE at ", read_, ": ",
                       start.kind == RedisConnection::ReplyStart::kError
                           ? start.text
                           : absl::StrCat(start.length, " bytes where ", expected, " were due"),
                       ")"));
    }
    piece_end_ = read_ + expected;
  }
  ASSIGN_OR_RETURN(const size_t got,
                   connection_->ReadBulk(dst, std::min<uint64_t>(n, piece_end_ - read_)));
  read_ += got;
  return got;
}

absl::StatusOr<std::vector<std::string>> RedisNodes::Scan(const std::string& pattern) {
  RETURN_IF_ERROR(DiscoverOnce());
  const absl::Time busy_until = absl::Now() + kBusyWait;
  for (;;) {
    absl::StatusOr<std::vector<std::string>> keys = ScanMasters(pattern);
    if (keys.ok() || !absl::IsUnavailable(keys.status()) || absl::Now() >= busy_until) return keys;
    // A master gone (a failover): scan again, all of it, over the masters as they are now.
    RefreshSlots({}).IgnoreError();
    absl::SleepFor(kRetryPause);
  }
}

absl::StatusOr<std::vector<std::string>> RedisNodes::ScanMasters(const std::string& pattern) {
  std::set<std::string> keys;
  for (const std::string& node : Masters()) {
    const Attempt scan = [&](RedisConnection& c, bool) -> absl::StatusOr<std::string> {
      std::string cursor = "0";
      do {
        ASSIGN_OR_RETURN(const RedisReply r,
                         c.Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}));
        if (r->type == REDIS_REPLY_ERROR) return ErrorText(Text(r.get()));
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return "not a cursor and keys";
        cursor = Text(r->element[0]);
        const redisReply* batch = r->element[1];
        for (size_t i = 0; i < batch->elements; ++i) keys.insert(Text(batch->element[i]));
      } while (cursor != "0");
      return std::string();
    };
    ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> connection,
                     Route("SCAN", pattern, scan, node));
    GiveBack(std::move(connection));
  }
  return std::vector<std::string>(keys.begin(), keys.end());
}

absl::StatusOr<bool> RedisNodes::SameSlot(absl::string_view a, absl::string_view b) {
  RETURN_IF_ERROR(DiscoverOnce());
  absl::MutexLock lock(&mu_);
  return !cluster_ || SlotOf(a) == SlotOf(b);
}

}  // namespace granary
