#include "pipeline/digest_file.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/hash.h"
#include "common/status_macros.h"

namespace granary {
namespace {

// The text of "key": (a number, or a quoted string without its quotes); false if absent.
bool Field(const std::string& line, const std::string& key, std::string* value) {
  const std::string tag = "\"" + key + "\":";
  const size_t at = line.find(tag);
  if (at == std::string::npos) return false;
  size_t begin = at + tag.size();
  if (begin < line.size() && line[begin] == '"') ++begin;
  *value = line.substr(begin, line.find_first_of("\",}", begin) - begin);
  return true;
}

}  // namespace

std::string DigestLine::ToJson() const {
  return absl::StrFormat(
      R"({"epoch":%d,"elements":%d,"multiset_xxh64":"%s","ordered_xxh64":"%s","duplicates_dropped":%d,"skipped":%d})",
      epoch, rows, HashToHex(multiset), HashToHex(ordered), dropped, skipped);
}

absl::StatusOr<DigestLine> DigestLine::Parse(const std::string& line) {
  DigestLine d;
  std::string value;
  const auto bad = [&](const char* key) {
    return absl::InvalidArgumentError(
        absl::StrCat("digest line '", line, "': missing or malformed \"", key, "\""));
  };
  if (!Field(line, "epoch", &value) || !absl::SimpleAtoi(value, &d.epoch)) return bad("epoch");
  if (!Field(line, "elements", &value) || !absl::SimpleAtoi(value, &d.rows)) {
    return bad("elements");
  }
  if (!Field(line, "multiset_xxh64", &value) || !absl::SimpleHexAtoi(value, &d.multiset)) {
    return bad("multiset_xxh64");
  }
  if (!Field(line, "ordered_xxh64", &value) || !absl::SimpleHexAtoi(value, &d.ordered)) {
    return bad("ordered_xxh64");
  }
  if (!Field(line, "duplicates_dropped", &value) || !absl::SimpleAtoi(value, &d.dropped)) {
    return bad("duplicates_dropped");
  }
  if (Field(line, "skipped", &value) && !absl::SimpleAtoi(value, &d.skipped)) return bad("skipped");
  return d;
}

absl::StatusOr<std::map<int64_t, DigestLine>> ReadDigestFile(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFileToString(env, path));
  std::map<int64_t, DigestLine> out;
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::StatusOr<DigestLine> d = DigestLine::Parse(lines[i]);
    if (!d.ok()) return Annotate(d.status(), absl::StrCat(path, " line ", i + 1));
    out[d->epoch] = *d;
  }
  return out;
}

}  // namespace granary
