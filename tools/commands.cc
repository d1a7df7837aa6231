#include "tools/commands.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/algorithm/container.h"
#include "absl/flags/internal/parse.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "tools/command_flags.h"

namespace granary {
namespace {

// Whether the last absl::ParseCommandLine set `flag`. Abseil (20220623, Debian 12) offers this
// only in its internal header; it counts flags read from --flagfile and --fromenv too.
bool WasGiven(const absl::CommandLineFlag& flag) {
  return absl::flags_internal::WasPresentOnCommandLine(flag.Name());
}

}  // namespace

const std::vector<Command>& Commands() {
  static const auto* const commands = new std::vector<Command>{
      {"local", LocalCommand, {"tools/udf_flags.cc"}},
      {"datagen", DatagenCommand},
      {"dispatcher",
       DispatcherCommand,
       {"tools/server_flags.cc", "tools/tls_flags.cc", "tools/obs_flags.cc", "tools/udf_flags.cc"}},
      {"worker",
       WorkerCommand,
       {"tools/server_flags.cc", "tools/tls_flags.cc", "tools/obs_flags.cc", "tools/udf_flags.cc"}},
      {"cluster", ClusterCommand},
      {"run", RunCommand, {"tools/udf_flags.cc", "tools/tls_flags.cc", "tools/client_flags.cc"}},
      {"precache", PrecacheCommand, {"tools/tls_flags.cc", "tools/client_flags.cc"}},
      {"status", StatusCommand, {"tools/tls_flags.cc"}},
      {"scale", ScaleCommand, {"tools/tls_flags.cc"}},
      {"journal", JournalCommand},
      {"chaos", ChaosCommand},
  };
  return *commands;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

std::vector<absl::CommandLineFlag*> CommandFlags(const Command& command) {
  const std::string own_file = absl::StrCat("tools/", command.name, "_command.cc");
  return FlagsOf({own_file, command.flag_groups});
}

std::string CommandFlagsHelp(const Command& command) {
  std::string help = absl::StrCat("flags of granary ", command.name, ":\n");
  for (const absl::CommandLineFlag* flag : CommandFlags(command)) {
    absl::StrAppend(&help, "  --", flag->Name(), " (", flag->Help(),
                    "); default: ", flag->DefaultValue(), ";\n");
  }
  absl::StrAppend(&help, "and Abseil's --", absl::StrJoin(AbseilFlagNames(), ", --"), "\n");
  return help;
}

absl::Status CheckFlagsGiven(const Command& command) {
  const std::vector<absl::CommandLineFlag*> accepted = CommandFlags(command);
  std::vector<absl::CommandLineFlag*> refused;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (WasGiven(*flag) && !IsAbseilFlag(*flag) && !absl::c_linear_search(accepted, flag)) {
      refused.push_back(flag);
    }
  }
  if (refused.empty()) return absl::OkStatus();
  const absl::CommandLineFlag* first = *absl::c_min_element(
      refused, [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::vector<std::string> owners;
  for (const Command& other : Commands()) {
    if (absl::c_linear_search(CommandFlags(other), first)) {
      owners.push_back(absl::StrCat("granary ", other.name));
    }
  }
  std::string message =
      absl::StrCat("--", first->Name(), " is not a flag of granary ", command.name);
  if (!owners.empty()) {
    absl::StrAppend(&message, " (it belongs to ", absl::StrJoin(owners, ", "), ")");
  }
  return absl::InvalidArgumentError(message);
}

std::vector<char*> ParseCommandFlags(int argc, char** argv) {
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  const absl::string_view program = argv[0];
  const Command* command = FindCommand(absl::StripPrefix(program, "granary "));
  const absl::Status given =
      command == nullptr ? absl::InternalError("not a granary command") : CheckFlagsGiven(*command);
  if (!given.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(given.message()).c_str());
    std::exit(2);
  }
  return positional;
}

}  // namespace granary
