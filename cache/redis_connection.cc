#include "cache/redis_connection.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "hiredis/hiredis.h"

namespace granary {
namespace {

constexpr timeval kConnectTimeout{5, 0};
constexpr timeval kCommandTimeout{30, 0};
// A reply's header line ("$<length>" or an error) is never longer.
constexpr size_t kMaxHeader = 64 << 10;
// A read of fewer bytes receives up to this many at once (and later reads take them from there).
constexpr size_t kSmallRead = 64 << 10;

// The RESP encoding of a command of `count` arguments whose first are `args`.
std::string RespArguments(const std::vector<std::string>& args, size_t count) {
  std::string out = absl::StrCat("*", count, "\r\n");
  for (const std::string& a : args) absl::StrAppend(&out, "$", a.size(), "\r\n", a, "\r\n");
  return out;
}

}  // namespace

void RedisReplyFree::operator()(redisReply* reply) const { freeReplyObject(reply); }

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Open(
    const std::string& address, const RedisCredentials& credentials) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis address '", address, "' is not HOST:PORT"));
  }
  redisContext* context =
      redisConnectWithTimeout(address.substr(0, colon).c_str(), port, kConnectTimeout);
  if (context == nullptr || context->err != 0) {
    const std::string why = context != nullptr ? context->errstr : "out of memory";
    if (context != nullptr) redisFree(context);
    return absl::UnavailableError(absl::StrCat("redis://", address, ": ", why));
  }
  redisSetTimeout(context, kCommandTimeout);
  std::unique_ptr<RedisConnection> connection(new RedisConnection(address, context));
  RETURN_IF_ERROR(connection->Authenticate(credentials));
  return connection;
}

absl::Status RedisConnection::Authenticate(const RedisCredentials& credentials) {
  const bool auth = !credentials.password.empty();
  std::vector<std::string> command = {"PING"};
  if (auth) {
    command = {"AUTH", credentials.password};
    if (!credentials.user.empty()) command.insert(command.begin() + 1, credentials.user);
  }
  ASSIGN_OR_RETURN(const RedisReply reply, Command(command));
  if (reply->type != REDIS_REPLY_ERROR) return absl::OkStatus();
  // The server's text (e.g. "WRONGPASS invalid username-password pair or user is disabled.",
  // "NOAUTH Authentication required.") never repeats the password.
  const std::string refusal(reply->str, reply->len);
  const std::string who =
      credentials.user.empty() ? "the default user" : absl::StrCat("user '", credentials.user, "'");
  return absl::UnauthenticatedError(
      auth ? absl::StrCat("redis://", address_, ": AUTH as ", who, " refused: ", refusal)
           : absl::StrCat("redis://", address_, " wants a password and none was given: ", refusal));
}

RedisConnection::RedisConnection(std::string address, redisContext* context)
    : address_(std::move(address)), context_(context) {}

RedisConnection::~RedisConnection() { redisFree(context_); }

absl::Status RedisConnection::Fail(const std::string& what, const std::string& why) {
  broken_ = true;
  return absl::UnavailableError(absl::StrCat("redis://", address_, ": ", what, ": ", why));
}

absl::StatusOr<RedisReply> RedisConnection::Command(const std::vector<std::string>& args) {
  if (!healthy()) return Fail(args[0], "the connection is not ready for a command");
  RETURN_IF_ERROR(Send(RespArguments(args, args.size())));
  return ReadReply(args[0]);
}

absl::StatusOr<RedisReply> RedisConnection::CommandWithPieces(
    const std::vector<std::string>& args, const std::vector<absl::string_view>& last) {
  if (!healthy()) return Fail(args[0], "the connection is not ready for a command");
  size_t length = 0;
  for (const absl::string_view piece : last) length += piece.size();
  std::string header = RespArguments(args, args.size() + 1);
  absl::StrAppend(&header, "$", length, "\r\n");
  RETURN_IF_ERROR(Send(header));
  for (const absl::string_view piece : last) RETURN_IF_ERROR(Send(piece));
  RETURN_IF_ERROR(Send("\r\n"));
  return ReadReply(args[0]);
}

absl::StatusOr<RedisReply> RedisConnection::ReadReply(const std::string& what) {
  void* reply = nullptr;
  if (redisGetReply(context_, &reply) != REDIS_OK || reply == nullptr) {
    return Fail(what, context_->errstr);
  }
  return RedisReply(static_cast<redisReply*>(reply));
}

absl::Status RedisConnection::SendCommand(const std::vector<std::string>& args) {
  if (broken_) return Fail(args[0], "the connection failed before");
  RETURN_IF_ERROR(Send(RespArguments(args, args.size())));
  ++unanswered_;
  return absl::OkStatus();
}

absl::Status RedisConnection::Send(absl::string_view data) {
  while (!data.empty()) {
    const ssize_t sent = send(context_->fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      data.remove_prefix(static_cast<size_t>(sent));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return Fail("write", "timed out");
    } else if (errno != EINTR) {
      return Fail("write", std::strerror(errno));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> RedisConnection::Receive(char* dst, size_t n) {
  for (;;) {
    const ssize_t got = recv(context_->fd, dst, n, 0);
    if (got > 0) return static_cast<size_t>(got);
    if (got == 0) return Fail("read", "the server closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Fail("read", "timed out");
    return Fail("read", std::strerror(errno));
  }
}

absl::StatusOr<std::string> RedisConnection::ReadLine() {
  size_t end = std::string::npos;
  while ((end = received_.find("\r\n", received_at_)) == std::string::npos) {
    if (received_.size() - received_at_ > kMaxHeader) {
      return Fail("read", "a reply line without its end");
    }
    char buffer[16 << 10];
    ASSIGN_OR_RETURN(const size_t got, Receive(buffer, sizeof(buffer)));
    received_.append(buffer, got);
  }
  std::string line = received_.substr(received_at_, end - received_at_);
  received_at_ = end + 2;
  return line;
}

absl::StatusOr<RedisConnection::ReplyStart> RedisConnection::ReadReplyStart() {
  if (broken_ || streaming_ || unanswered_ == 0) {
    return Fail("read", "no reply is due (or the last bulk string is not read to its end)");
  }
  ASSIGN_OR_RETURN(const std::string line, ReadLine());
  --unanswered_;
  ReplyStart start;
  int64_t number = 0;
  const bool numeric = line.size() > 1 && absl::SimpleAtoi(line.substr(1), &number);
  if (!line.empty() && line[0] == '-') {
    start.kind = ReplyStart::kError;
    start.text = line.substr(1);
  } else if (!line.empty() && line[0] == '+') {
    start.kind = ReplyStart::kStatus;
    start.text = line.substr(1);
  } else if (numeric && line[0] == ':') {
    start.kind = ReplyStart::kInteger;
    start.integer = number;
  } else if (numeric && line[0] == '$' && number >= -1) {
    if (number >= 0) {
      start.kind = ReplyStart::kBulk;
      start.length = static_cast<uint64_t>(number);
      bulk_left_ = start.length;
      streaming_ = true;
      if (bulk_left_ == 0) RETURN_IF_ERROR(FinishBulk());
    }
  } else {
    return Fail("read", absl::StrCat("an unexpected reply: '", line.substr(0, 80), "'"));
  }
  return start;
}

absl::StatusOr<size_t> RedisConnection::ReadBulk(char* dst, size_t n) {
  if (!streaming_) return 0;
  size_t got = std::min<uint64_t>(n, bulk_left_);
  if (received_at_ == received_.size() && got < kSmallRead) {
    // A small read (a record's header) takes what has arrived, up to kSmallRead, in one call.
    received_.resize(kSmallRead);
    received_at_ = 0;
    absl::StatusOr<size_t> arrived = Receive(received_.data(), kSmallRead);
    received_.resize(arrived.ok() ? *arrived : 0);
    RETURN_IF_ERROR(arrived.status());
  }
  if (received_at_ < received_.size()) {
    got = std::min(got, received_.size() - received_at_);
    std::memcpy(dst, received_.data() + received_at_, got);
    received_at_ += got;
  } else {
    ASSIGN_OR_RETURN(got, Receive(dst, got));
  }
  bulk_left_ -= got;
  if (bulk_left_ == 0) RETURN_IF_ERROR(FinishBulk());
  return got;
}

absl::Status RedisConnection::FinishBulk() {
  char crlf[2];
  for (size_t have = 0; have < 2;) {
    if (received_at_ < received_.size()) {
      crlf[have++] = received_[received_at_++];
    } else {
      ASSIGN_OR_RETURN(const size_t got, Receive(crlf + have, 2 - have));
      have += got;
    }
  }
  if (crlf[0] != '\r' || crlf[1] != '\n') return Fail("read", "a bulk string without its CRLF");
  if (received_at_ == received_.size()) {
    received_.clear();
    received_at_ = 0;
  }
  streaming_ = false;
  return absl::OkStatus();
}

}  // namespace granary
