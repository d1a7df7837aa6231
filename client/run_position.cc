#include "client/run_position.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/hash.h"
#include "common/status_macros.h"

namespace granary {
namespace {

constexpr char kPositionHeader[] = "granary-run-position 1";

}  // namespace

std::string FormatRunPosition(const RunPosition& p) {
  return absl::StrCat(kPositionHeader, "\nepoch ", p.epoch, "\nrows ", p.rows, "\nmultiset ",
                      HashToHex(p.multiset), "\nduplicates ", p.duplicates, "\nreader ",
                      absl::Base64Escape(p.reader), "\n");
}

absl::StatusOr<RunPosition> ParseRunPosition(const std::string& text, const std::string& path) {
  const auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("position file ", path, ": ", what));
  };
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty() || lines[0] != kPositionHeader) {
    return bad(absl::StrCat("does not start with '", kPositionHeader, "'"));
  }
  RunPosition p;
  bool seen[5] = {false, false, false, false, false};
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> kv = absl::StrSplit(lines[i], absl::MaxSplits(' ', 1));
    const std::string value = kv.size() > 1 ? kv[1] : "";
    bool ok = true;
    if (kv[0] == "epoch") {
      ok = absl::SimpleAtoi(value, &p.epoch) && p.epoch >= 0;
      seen[0] = true;
    } else if (kv[0] == "rows") {
      ok = absl::SimpleAtoi(value, &p.rows) && p.rows >= 0;
      seen[1] = true;
    } else if (kv[0] == "multiset") {
      ok = absl::SimpleHexAtoi(value, &p.multiset);
      seen[2] = true;
    } else if (kv[0] == "duplicates") {
      ok = absl::SimpleAtoi(value, &p.duplicates) && p.duplicates >= 0;
      seen[3] = true;
    } else if (kv[0] == "reader") {
      ok = absl::Base64Unescape(value, &p.reader);
      seen[4] = true;
    } else {
      return bad(absl::StrCat("line ", i + 1, ": unknown key '", kv[0], "'"));
    }
    if (!ok) return bad(absl::StrCat("line ", i + 1, ": bad value '", value, "'"));
  }
  for (bool s : seen) {
    if (!s) return bad("is incomplete (needs epoch, rows, multiset, duplicates and reader)");
  }
  return p;
}

absl::StatusOr<RunPosition> ReadRunPositionFile(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFileToString(env, path));
  return ParseRunPosition(text, path);
}

}  // namespace granary
