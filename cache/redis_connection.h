// RedisConnection: one connection to one Redis server (hiredis connects and parses replies), the
// unit RedisNodes pools. Commands are request and reply (Command). Alongside, commands can be
// pipelined and their replies read off the socket directly (SendCommand, ReadReplyStart, ReadBulk):
// a bulk string's bytes go straight into the caller's buffer, so a chunk is read with the kernel's
// one copy, not through hiredis' growing reply buffer and a copy out of it.
//
// Authentication: Open sends AUTH (as the ACL user, or the default user) when credentials carry
// a password, else a PING, so a server that refuses the connection says so at once, never later
// as a command's error reply. Plain TCP only: Debian 12's hiredis (0.14) has no TLS.
//
// Errors: Unavailable naming the server when it cannot be reached, or an I/O error or timeout
// (30 s) hits a command; Unauthenticated naming the server (never the password) when it wants a
// password none was given for, or refuses the one given; the connection is then not healthy() and
// must be dropped. An error *reply* (`-ERR ...`, `-MOVED ...`) is not a failed call: it comes back
// as the reply.
//
// Thread-compatible: one caller at a time (RedisNodes lends it to one).
#ifndef GRANARY_CACHE_REDIS_CONNECTION_H_
#define GRANARY_CACHE_REDIS_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct redisContext;
struct redisReply;

namespace granary {

struct RedisReplyFree {
  void operator()(redisReply* reply) const;
};
// A reply, owned.
using RedisReply = std::unique_ptr<redisReply, RedisReplyFree>;

// Who a connection authenticates as.
struct RedisCredentials {
  std::string user;      // an ACL user; "" for the default user
  std::string password;  // "" for none: no AUTH (REQUIRES: a password if `user` is set)
};

class RedisConnection {
 public:
  // Connects to `address` ("HOST:PORT") and authenticates with `credentials`.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Open(
      const std::string& address, const RedisCredentials& credentials = {});
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  const std::string& address() const { return address_; }
  // False after a failed call, and while a sent command's reply is not read to its end.
  bool healthy() const { return !broken_ && !streaming_ && unanswered_ == 0; }

  // Sends `args` (binary-safe) and returns the reply, an error reply included.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string>& args);
  // Command(`args` and then one more argument, the concatenation of `last`), written to the
  // socket from the pieces themselves (a 64 MB chunk's SET is not first copied into one buffer).
  absl::StatusOr<RedisReply> CommandWithPieces(const std::vector<std::string>& args,
                                               const std::vector<absl::string_view>& last);

  // Pipelining. Sends `args` without waiting for its reply.
  absl::Status SendCommand(const std::vector<std::string>& args);
  // The start of the next reply to a sent command. A bulk string's bytes then follow, read
  // with ReadBulk (all of them before the next ReadReplyStart).
  struct ReplyStart {
    enum Kind { kBulk, kNil, kError, kStatus, kInteger } kind = kNil;
    uint64_t length = 0;  // kBulk: the string's size
    int64_t integer = 0;  // kInteger
    std::string text;     // kError, kStatus: the line after '-' or '+'
  };
  absl::StatusOr<ReplyStart> ReadReplyStart();
  // Up to `n` of the current bulk string's next bytes into `dst`; 0 at its end.
  absl::StatusOr<size_t> ReadBulk(char* dst, size_t n);

 private:
  RedisConnection(std::string address, redisContext* context);
  // AUTH with `credentials`, or PING without a password; Unauthenticated if the server refuses.
  absl::Status Authenticate(const RedisCredentials& credentials);
  // Marks the connection broken and returns Unavailable naming `what` and the cause.
  absl::Status Fail(const std::string& what, const std::string& why);
  // The reply to the command `what` just sent, read by hiredis (its reader sees the socket only
  // here, when no pipelined reply is pending).
  absl::StatusOr<RedisReply> ReadReply(const std::string& what);
  // Writes all of `data` to the socket; Unavailable on error or timeout.
  absl::Status Send(absl::string_view data);
  // Receives at most `n` bytes into `dst` (at least one); Unavailable on EOF, error or timeout.
  absl::StatusOr<size_t> Receive(char* dst, size_t n);
  // The next line of the reply stream, without its CRLF.
  absl::StatusOr<std::string> ReadLine();
  // Consumes the bulk string's closing CRLF.
  absl::Status FinishBulk();

  const std::string address_;
  redisContext* const context_;
  bool broken_ = false;
  int64_t unanswered_ = 0;  // sent commands whose reply has not been started
  bool streaming_ = false;  // within a bulk string's bytes
  uint64_t bulk_left_ = 0;  // the bulk string's bytes not yet read
  std::string received_;    // bytes received, not yet consumed...
  size_t received_at_ = 0;  // ...from this offset on
};

}  // namespace granary

#endif  // GRANARY_CACHE_REDIS_CONNECTION_H_
