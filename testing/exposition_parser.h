// ParseExposition: reads the Prometheus text exposition format (0.0.4) strictly, as a scraper
// would, so tests can check that what `/metrics` serves parses and read values out of it.
// Checked: every line is a comment, a `# HELP`/`# TYPE` line or a sample; sample names and
// label names are valid, label values properly quoted and escaped, values numbers (or NaN,
// +Inf, -Inf); every sample belongs to a family whose TYPE came first (a histogram's
// `_bucket`/`_sum`/`_count`); a family's TYPE appears once; a histogram's buckets are
// cumulative (non-decreasing, in ascending `le`), end in `le="+Inf"` and that bucket equals
// `_count`. Errors name the line number and what is wrong.
#ifndef GRANARY_TESTING_EXPOSITION_PARSER_H_
#define GRANARY_TESTING_EXPOSITION_PARSER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace granary {

struct ExpositionSample {
  std::string name;  // as written, e.g. granary_journal_commit_seconds_bucket
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  // Family name → its TYPE ("counter", "gauge", "histogram", …).
  std::map<std::string, std::string> types;
  std::vector<ExpositionSample> samples;

  // The sum of the values of samples named `name` whose labels include every one of `match`.
  double Sum(absl::string_view name, const std::map<std::string, std::string>& match = {}) const;
  // Whether any sample is named `name`.
  bool Has(absl::string_view name) const;
};

absl::StatusOr<Exposition> ParseExposition(absl::string_view text);

}  // namespace granary

#endif  // GRANARY_TESTING_EXPOSITION_PARSER_H_
