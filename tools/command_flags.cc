#include "tools/command_flags.h"

#include <fstream>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace granary {
namespace {

bool IsBoolFlag(absl::string_view name) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  return flag != nullptr && flag->IsOfType<bool>();
}

// Adds the flags of `args` (not including a program name) to `*given`; `depth` bounds nested
// flag files.
absl::Status AddFlags(const std::vector<std::string>& args, int depth,
                      std::vector<std::string>* given);

absl::Status AddFlagFile(const std::string& path, int depth, std::vector<std::string>* given) {
  if (depth > 10) {
    return absl::InvalidArgumentError(
        absl::StrCat("--flagfile ", path, ": flag files nested more than 10 deep"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--flagfile ", path, " cannot be read"));
  std::vector<std::string> args;
  for (std::string line; std::getline(in, line);) {
    const absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (!trimmed.empty() && trimmed[0] != '#') args.emplace_back(trimmed);
  }
  return AddFlags(args, depth + 1, given);
}

absl::Status AddFlags(const std::vector<std::string>& args, int depth,
                      std::vector<std::string>* given) {
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // a positional argument
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t equals = arg.find('=');
    std::string name(arg.substr(0, equals));
    std::string value;
    const bool known = absl::FindCommandLineFlag(name) != nullptr;
    if (!known && absl::StartsWith(name, "no") && IsBoolFlag(name.substr(2))) {
      name = name.substr(2);
    } else if (equals != absl::string_view::npos) {
      value = std::string(arg.substr(equals + 1));
    } else if (known && !IsBoolFlag(name) && i + 1 < args.size()) {
      value = args[++i];  // "--name value"
    }
    given->push_back(name);
    if (name == "flagfile") {
      for (const absl::string_view path : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        RETURN_IF_ERROR(AddFlagFile(std::string(path), depth, given));
      }
    } else if (name == "fromenv" || name == "tryfromenv") {
      for (const absl::string_view from_env : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        given->emplace_back(from_env);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<absl::string_view>& SharedFlags() {
  static const auto* const shared = new std::vector<absl::string_view>{
      "help",    "helpfull",        "helpshort", "helppackage", "helpon",     "helpmatch",
      "version", "only_check_args", "flagfile",  "fromenv",     "tryfromenv", "undefok"};
  return *shared;
}

absl::StatusOr<std::vector<std::string>> FlagsGiven(int argc, char** argv) {
  std::vector<std::string> given;
  RETURN_IF_ERROR(AddFlags(std::vector<std::string>(argv + std::min(argc, 1), argv + argc),
                           /*depth=*/0, &given));
  return given;
}

}  // namespace granary
