#include "tests/run_outputs.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "gtest/gtest.h"

namespace granary::testing {
namespace {

// The value of "key": in a digest line (numbers and strings).
std::string Field(const std::string& line, const std::string& key) {
  const std::string tag = "\"" + key + "\":";
  const size_t at = line.find(tag);
  if (at == std::string::npos) return "";
  size_t begin = at + tag.size();
  if (line[begin] == '"') ++begin;
  return line.substr(begin, line.find_first_of("\",}", begin) - begin);
}

// The integer after "\n<key> " in a position file, or -1.
int64_t PositionField(const std::string& text, const std::string& key) {
  const std::string tag = "\n" + key + " ";
  const size_t at = text.find(tag);
  int64_t value = -1;
  if (at == std::string::npos) return -1;
  const size_t begin = at + tag.size();
  if (!absl::SimpleAtoi(text.substr(begin, text.find('\n', begin) - begin), &value)) return -1;
  return value;
}

}  // namespace

std::map<int64_t, DigestLine> ReadDigests(const std::string& path) {
  std::map<int64_t, DigestLine> out;
  auto text = ReadFileToString(Env::Default(), path);
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return out;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    const std::string l(line);
    int64_t epoch = -1;
    DigestLine d;
    EXPECT_TRUE(absl::SimpleAtoi(Field(l, "epoch"), &epoch)) << l;
    EXPECT_TRUE(absl::SimpleAtoi(Field(l, "elements"), &d.rows)) << l;
    EXPECT_TRUE(absl::SimpleHexAtoi(Field(l, "multiset_xxh64"), &d.multiset)) << l;
    EXPECT_TRUE(absl::SimpleHexAtoi(Field(l, "ordered_xxh64"), &d.ordered)) << l;
    EXPECT_TRUE(absl::SimpleAtoi(Field(l, "duplicates_dropped"), &d.dropped)) << l;
    out[epoch] = d;
  }
  return out;
}

RunPosition ReadRunPosition(const std::string& path) {
  auto text = ReadFileToString(Env::Default(), path);
  if (!text.ok()) return {};
  const int64_t epoch = PositionField(*text, "epoch");
  const int64_t rows = PositionField(*text, "rows");
  if (epoch < 0 || rows < 0) return {};
  return {epoch, rows};
}

}  // namespace granary::testing
