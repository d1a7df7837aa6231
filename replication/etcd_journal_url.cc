#include "replication/etcd_journal_url.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace granary {
namespace {

constexpr absl::string_view kScheme = "etcd://";

}  // namespace

bool IsEtcdJournalUrl(absl::string_view url) { return absl::StartsWith(url, kScheme); }

absl::StatusOr<EtcdJournalUrl> ParseEtcdJournalUrl(absl::string_view url) {
  const auto invalid = [url](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "journal URL '", url, "': ", why, " (expected etcd://HOST:PORT[,HOST:PORT...]/PREFIX)"));
  };
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, kScheme)) return invalid("not an etcd:// URL");
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos) return invalid("no /PREFIX after the endpoints");
  EtcdJournalUrl parsed;
  parsed.prefix = std::string(absl::StripSuffix(rest.substr(slash), "/"));
  if (parsed.prefix.empty() || parsed.prefix == "/") return invalid("the prefix is empty");
  for (absl::string_view endpoint : absl::StrSplit(rest.substr(0, slash), ',')) {
    const size_t colon = endpoint.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(endpoint.substr(colon + 1), &port) || port <= 0 || port > 65535) {
      return invalid(absl::StrCat("endpoint '", endpoint, "' is not HOST:PORT"));
    }
    parsed.endpoints.emplace_back(endpoint);
  }
  return parsed;
}

}  // namespace granary
