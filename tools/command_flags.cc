#include "tools/command_flags.h"

#include <string>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace granary {
namespace {

// (file, flag) pairs recorded by GRANARY_COMMAND_BORROWS_FLAG while static objects initialize.
std::vector<std::pair<std::string, std::string>>& BorrowedFlags() {
  static auto* const borrowed = new std::vector<std::pair<std::string, std::string>>;
  return *borrowed;
}

void SortByName(std::vector<absl::CommandLineFlag*>& flags) {
  absl::c_sort(flags, [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) {
    return a->Name() < b->Name();
  });
}

}  // namespace

bool IsFile(absl::string_view path, absl::string_view file) {
  return path == file || absl::EndsWith(path, absl::StrCat("/", file));
}

bool RecordBorrowedFlag(const char* path, const char* name) {
  BorrowedFlags().emplace_back(path, name);
  return true;
}

std::vector<absl::CommandLineFlag*> FlagsOf(const CommandFlagSources& sources) {
  std::vector<absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    const std::string file = flag->Filename();
    const bool borrowed =
        absl::c_any_of(BorrowedFlags(), [&, &name = name](const auto& path_and_flag) {
          return path_and_flag.second == name && IsFile(path_and_flag.first, sources.own_file);
        });
    if (IsFile(file, sources.own_file) || borrowed ||
        absl::c_any_of(sources.groups,
                       [&file](absl::string_view group) { return IsFile(file, group); })) {
      flags.push_back(flag);
    }
  }
  SortByName(flags);
  return flags;
}

bool IsAbseilFlag(const absl::CommandLineFlag& flag) {
  return absl::StrContains(flag.Filename(), "absl/flags/");
}

std::vector<std::string> AbseilFlagNames() {
  std::vector<std::string> names = {"help",        "helpfull",  "helpmatch",       "helpon",
                                    "helppackage", "helpshort", "only_check_args", "version"};
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsAbseilFlag(*flag)) names.emplace_back(name);
  }
  absl::c_sort(names);
  return names;
}

}  // namespace granary
