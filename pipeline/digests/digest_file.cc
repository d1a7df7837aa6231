#include "pipeline/digests/digest_file.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "proto/digest.pb.h"

namespace granary {

std::string DigestLine::ToJson() const {
  // Written by hand rather than by the JSON mapping, which would quote the int64 fields.
  std::string line = absl::StrFormat(
      R"({"epoch":%d,"elements":%d,"multiset_xxh64":"%s","ordered_xxh64":"%s","duplicates_dropped":%d,"skipped":%d)",
      epoch, rows, HashToHex(multiset), HashToHex(ordered), dropped, skipped);
  // The equal-shares fields only for an epoch that had them.
  if (steps != 0 || padding != 0 || remainder_dropped != 0) {
    absl::StrAppendFormat(&line, R"(,"steps":%d,"padding":%d,"remainder_dropped":%d)", steps,
                          padding, remainder_dropped);
  }
  return line + "}";
}

absl::StatusOr<DigestLine> DigestLine::Parse(const std::string& line) {
  DigestLineProto proto;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // Fields of later versions.
  const auto parsed = google::protobuf::util::JsonStringToMessage(line, &proto, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("digest line '", line,
                                                   "': not a JSON object with the digest fields (",
                                                   parsed.ToString(), ")"));
  }
  const auto bad = [&](const char* key) {
    return absl::InvalidArgumentError(
        absl::StrCat("digest line '", line, "': missing or malformed \"", key, "\""));
  };
  const auto hex = [](const std::string& text, uint64_t* value) {
    return text.size() == 16 && absl::SimpleHexAtoi(text, value);
  };
  DigestLine d;
  if (!proto.has_epoch()) return bad("epoch");
  d.epoch = proto.epoch();
  if (!proto.has_elements()) return bad("elements");
  d.rows = proto.elements();
  if (!hex(proto.multiset_xxh64(), &d.multiset)) return bad("multiset_xxh64");
  if (!hex(proto.ordered_xxh64(), &d.ordered)) return bad("ordered_xxh64");
  if (!proto.has_duplicates_dropped()) return bad("duplicates_dropped");
  d.dropped = proto.duplicates_dropped();
  d.skipped = proto.skipped();
  d.steps = proto.steps();
  d.padding = proto.padding();
  d.remainder_dropped = proto.remainder_dropped();
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
