#include "tools/server_flags.h"

#include <signal.h>

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, host, "127.0.0.1",
          "Address to listen on. 127.0.0.1 keeps the server local; 0.0.0.0 serves a cluster.");
ABSL_FLAG(int, port, 0, "Port to listen on; 0 picks a free one (printed at start).");
ABSL_FLAG(std::vector<std::string>, data_roots, {},
          "Comma-separated directories pipelines may read files from (after resolving symlinks "
          "and '..'); a source or glob naming anything else is refused. Empty: no file source "
          "is accepted.");

ABSL_FLAG(int32_t, max_message_bytes, 4 << 20,
          "Largest request message a server accepts, in bytes (gRPC's default, 4 MiB).");

ABSL_FLAG(std::string, redis_user, "",
          "The ACL user a redis:// cache root is reached as (Redis 6+; empty: the default "
          "user). Needs --redis_password_file.");
ABSL_FLAG(std::string, redis_password_file, "",
          "A file holding the password of the Redis cache tier (AUTH; up to a trailing "
          "newline). Never put it in the redis:// URL, which is journaled and shown.");

namespace granary {
namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

std::string ListenAddress() {
  return absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
}

absl::StatusOr<DataRoots> DataRootsFromFlags() {
  absl::StatusOr<DataRoots> roots = DataRoots::Create(absl::GetFlag(FLAGS_data_roots));
  if (!roots.ok()) return Annotate(roots.status(), "--data_roots");
  return roots;
}

absl::StatusOr<RedisCredentials> RedisCredentialsFromFlags() {
  RedisCredentials credentials;
  credentials.user = absl::GetFlag(FLAGS_redis_user);
  const std::string file = absl::GetFlag(FLAGS_redis_password_file);
  if (file.empty()) {
    if (credentials.user.empty()) return credentials;
    return absl::InvalidArgumentError(absl::StrCat("--redis_user ", credentials.user,
                                                   " needs --redis_password_file (its password)"));
  }
  absl::StatusOr<std::string> password = ReadFileToString(Env::Default(), file);
  if (!password.ok()) return Annotate(password.status(), "--redis_password_file");
  while (!password->empty() && (password->back() == '\n' || password->back() == '\r')) {
    password->pop_back();
  }
  if (password->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--redis_password_file ", file, ": empty (no password in it)"));
  }
  credentials.password = *std::move(password);
  return credentials;
}

std::vector<std::string> RedisCredentialFlags() {
  std::vector<std::string> flags;
  if (!absl::GetFlag(FLAGS_redis_user).empty()) {
    flags.push_back("--redis_user=" + absl::GetFlag(FLAGS_redis_user));
  }
  if (!absl::GetFlag(FLAGS_redis_password_file).empty()) {
    flags.push_back("--redis_password_file=" + absl::GetFlag(FLAGS_redis_password_file));
  }
  return flags;
}

int MaxMessageBytes() { return absl::GetFlag(FLAGS_max_message_bytes); }

void WarnIfPlaintextOnNetwork(const TransportSecurity& security) {
  const std::string warning = PlaintextWarning(security, absl::GetFlag(FLAGS_host));
  if (!warning.empty()) std::fprintf(stderr, "%s\n", warning.c_str());
}

void BlockTerminationSignals() {
  const sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal() {
  const sigset_t set = TerminationSignals();
  int signal = 0;
  sigwait(&set, &signal);
  return signal;
}

}  // namespace granary
