#include "granary/client_config.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "proto/client.pb.h"

namespace granary {
namespace {

// `path` as the file at `config_path` names it: relative to that file's directory.
std::string RelativeTo(const std::string& config_path, const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  const size_t slash = config_path.rfind('/');
  return slash == std::string::npos ? path : absl::StrCat(config_path.substr(0, slash + 1), path);
}

}  // namespace

absl::Status ApplyClientConfigFile(const std::string& path, ClientOptions* options) {
  const std::string origin = absl::StrCat("client config ", path);
  Env* env = Env::Default();
  absl::StatusOr<std::string> text = ReadFileToString(env, path);
  if (!text.ok()) return Annotate(text.status(), origin);
  ClientConfig config;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = false;
  if (const auto parsed = google::protobuf::util::JsonStringToMessage(*text, &config, parse);
      !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": not a client configuration (JSON of ClientConfig, client/FORMAT.md): ",
        std::string(parsed.message())));
  }
  const bool tls = !config.tls_ca().empty() || !config.tls_cert().empty() ||
                   !config.tls_key().empty() || !config.token_file().empty();
  if (config.insecure() && tls) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": field insecure is set with TLS files or a token_file: choose one"));
  }
  // A file it names, read (so that a missing one is an error naming the field).
  const auto read_named = [&](const char* field,
                              const std::string& file) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::string> contents = ReadFileToString(env, file);
    if (!contents.ok()) return Annotate(contents.status(), absl::StrCat(origin, ": field ", field));
    return contents;
  };
  if (options->dispatcher_address.empty()) options->dispatcher_address = config.dispatcher();
  const bool explicit_tls = !options->tls_ca_file.empty() || !options->tls_cert_file.empty() ||
                            !options->tls_key_file.empty() || !options->bearer_token.empty();
  if (!options->insecure && !explicit_tls) options->insecure = config.insecure();
  if (options->insecure) return absl::OkStatus();
  const struct {
    const char* field;
    const std::string& value;
    std::string& option;
  } files[] = {{"tls_ca", config.tls_ca(), options->tls_ca_file},
               {"tls_cert", config.tls_cert(), options->tls_cert_file},
               {"tls_key", config.tls_key(), options->tls_key_file}};
  for (const auto& f : files) {
    if (f.value.empty() || !f.option.empty()) continue;
    const std::string file = RelativeTo(path, f.value);
    RETURN_IF_ERROR(read_named(f.field, file).status());
    f.option = file;
  }
  if (!config.token_file().empty() && options->bearer_token.empty()) {
    ASSIGN_OR_RETURN(const std::string token,
                     read_named("token_file", RelativeTo(path, config.token_file())));
    options->bearer_token = std::string(absl::StripAsciiWhitespace(token));
  }
  return absl::OkStatus();
}

}  // namespace granary
