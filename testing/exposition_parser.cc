#include "testing/exposition_parser.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace granary {
namespace {

bool NameChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

// Reads a metric or label name at `pos`; empty when none.
std::string ReadName(absl::string_view line, size_t& pos) {
  const size_t start = pos;
  while (pos < line.size() && NameChar(line[pos], pos == start)) ++pos;
  return std::string(line.substr(start, pos - start));
}

bool ParseValue(absl::string_view text, double* value) {
  if (text == "NaN") {
    *value = std::numeric_limits<double>::quiet_NaN();
  } else if (text == "+Inf") {
    *value = std::numeric_limits<double>::infinity();
  } else if (text == "-Inf") {
    *value = -std::numeric_limits<double>::infinity();
  } else {
    return absl::SimpleAtod(text, value) && !std::isnan(*value) && !std::isinf(*value);
  }
  return true;
}

// The family a sample name belongs to, given the declared types: a histogram's series carry
// suffixes.
std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  if (types.count(name)) return name;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    if (absl::EndsWith(name, suffix)) {
      const std::string base = name.substr(0, name.size() - absl::string_view(suffix).size());
      const auto it = types.find(base);
      if (it != types.end() && (it->second == "histogram" || it->second == "summary")) return base;
    }
  }
  return "";
}

absl::Status LineError(int line_number, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("exposition line ", line_number, ": ", what));
}

absl::StatusOr<ExpositionSample> ParseSample(absl::string_view line, int n) {
  ExpositionSample s;
  size_t pos = 0;
  s.name = ReadName(line, pos);
  if (s.name.empty()) return LineError(n, "no metric name");
  if (pos < line.size() && line[pos] == '{') {
    ++pos;
    while (pos < line.size() && line[pos] != '}') {
      const std::string label = ReadName(line, pos);
      if (label.empty()) return LineError(n, "bad label name");
      if (pos + 1 >= line.size() || line[pos] != '=' || line[pos + 1] != '"') {
        return LineError(n, absl::StrCat("label ", label, " not followed by =\""));
      }
      pos += 2;
      std::string value;
      bool closed = false;
      while (pos < line.size()) {
        const char c = line[pos++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\') {
          if (pos >= line.size()) break;
          const char e = line[pos++];
          if (e == 'n') {
            value += '\n';
          } else if (e == '\\' || e == '"') {
            value += e;
          } else {
            return LineError(n, absl::StrCat("bad escape in label ", label));
          }
        } else {
          value += c;
        }
      }
      if (!closed) return LineError(n, absl::StrCat("unterminated value of label ", label));
      if (!s.labels.emplace(label, value).second) {
        return LineError(n, absl::StrCat("label ", label, " twice"));
      }
      if (pos < line.size() && line[pos] == ',') ++pos;
    }
    if (pos >= line.size()) return LineError(n, "unterminated label set");
    ++pos;  // '}'
  }
  if (pos >= line.size() || line[pos] != ' ') return LineError(n, "no value");
  const std::vector<absl::string_view> rest =
      absl::StrSplit(line.substr(pos + 1), ' ', absl::SkipEmpty());
  if (rest.empty() || rest.size() > 2)
    return LineError(n, "expected a value and an optional timestamp");
  if (!ParseValue(rest[0], &s.value)) {
    return LineError(n, absl::StrCat("bad value '", rest[0], "'"));
  }
  return s;
}

// Checks every histogram's buckets against its count.
absl::Status CheckHistograms(const Exposition& e) {
  for (const auto& [family, type] : e.types) {
    if (type != "histogram") continue;
    // Per label set (without le): its buckets in order, and its count.
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
    std::map<std::map<std::string, std::string>, double> counts;
    for (const ExpositionSample& s : e.samples) {
      if (s.name == family + "_bucket") {
        auto labels = s.labels;
        const auto le = labels.find("le");
        if (le == labels.end()) return absl::InvalidArgumentError(family + "_bucket without le");
        double bound;
        if (!ParseValue(le->second, &bound)) {
          return absl::InvalidArgumentError(absl::StrCat(family, ": bad le '", le->second, "'"));
        }
        labels.erase(le);
        buckets[labels].emplace_back(bound, s.value);
      } else if (s.name == family + "_count") {
        counts[s.labels] = s.value;
      }
    }
    for (const auto& [labels, series] : buckets) {
      for (size_t i = 1; i < series.size(); ++i) {
        if (series[i].first <= series[i - 1].first || series[i].second < series[i - 1].second) {
          return absl::InvalidArgumentError(
              absl::StrCat(family, ": buckets not ascending and cumulative"));
        }
      }
      if (series.empty() || !std::isinf(series.back().first)) {
        return absl::InvalidArgumentError(absl::StrCat(family, ": no le=\"+Inf\" bucket"));
      }
      const auto count = counts.find(labels);
      if (count == counts.end() || count->second != series.back().second) {
        return absl::InvalidArgumentError(
            absl::StrCat(family, ": the +Inf bucket is not the _count"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

double Exposition::Sum(absl::string_view name,
                       const std::map<std::string, std::string>& match) const {
  double sum = 0;
  for (const ExpositionSample& s : samples) {
    if (s.name != name) continue;
    bool matches = true;
    for (const auto& [label, value] : match) {
      const auto it = s.labels.find(label);
      if (it == s.labels.end() || it->second != value) matches = false;
    }
    if (matches) sum += s.value;
  }
  return sum;
}

bool Exposition::Has(absl::string_view name) const {
  for (const ExpositionSample& s : samples) {
    if (s.name == name) return true;
  }
  return false;
}

absl::StatusOr<Exposition> ParseExposition(absl::string_view text) {
  Exposition e;
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++n;
    if (line.empty()) continue;
    if (line[0] == '#') {
      const std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(' ', 3));
      if (parts.size() >= 3 && parts[1] == "TYPE") {
        if (parts.size() != 4) return LineError(n, "TYPE without a type");
        static const char* const kTypes[] = {"counter", "gauge", "histogram", "summary", "untyped"};
        bool known = false;
        for (const char* t : kTypes) known = known || parts[3] == t;
        if (!known) return LineError(n, absl::StrCat("unknown type '", parts[3], "'"));
        if (!e.types.emplace(std::string(parts[2]), std::string(parts[3])).second) {
          return LineError(n, absl::StrCat("second TYPE of ", parts[2]));
        }
      }
      continue;  // HELP lines and comments
    }
    absl::StatusOr<ExpositionSample> sample = ParseSample(line, n);
    if (!sample.ok()) return sample.status();
    if (FamilyOf(sample->name, e.types).empty()) {
      return LineError(n, absl::StrCat("sample ", sample->name, " before its TYPE"));
    }
    e.samples.push_back(*std::move(sample));
  }
  if (absl::Status s = CheckHistograms(e); !s.ok()) return s;
  return e;
}

}  // namespace granary
