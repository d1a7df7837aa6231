// Which Abseil flags a subcommand of the `granary` binary accepts, read from Abseil's flag
// registry (absl/flags/reflection.h), where every flag carries the file that defines it. All
// commands' flags live in one global namespace, so without this `granary run --journal_dir=x`
// would be accepted and ignored.
//
// A command's flags are, each written once:
//  - the flags defined (ABSL_FLAG) in its own file, tools/<command>_command.cc;
//  - every flag of the flag groups it names in Commands() (commands.cc): shared files such as
//    tools/tls_flags.cc;
//  - the flags of other files it borrows with GRANARY_COMMAND_BORROWS_FLAG in its own file.
// Abseil's own flags (--helpfull, --flagfile, --fromenv, ...) are every command's.
#ifndef GRANARY_TOOLS_COMMAND_FLAGS_H_
#define GRANARY_TOOLS_COMMAND_FLAGS_H_

#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/declare.h"
#include "absl/strings/string_view.h"

// At namespace scope in tools/<command>_command.cc: declares the flag `name` of another file
// (as ABSL_DECLARE_FLAG does) and makes it a flag of <command> too.
#define GRANARY_COMMAND_BORROWS_FLAG(type, name)                   \
  ABSL_DECLARE_FLAG(type, name);                                   \
  [[maybe_unused]] static const bool granary_borrows_flag_##name = \
      ::granary::RecordBorrowedFlag(__FILE__, #name)

namespace granary {

// Where a command's flags are defined: its own file and the flag groups it accepts whole.
struct CommandFlagSources {
  // The command's own file, e.g. "tools/run_command.cc".
  absl::string_view own_file;
  // Files every flag of which the command accepts, e.g. "tools/tls_flags.cc".
  std::vector<absl::string_view> groups;
};

// The flags of `sources` (see the top of this file), sorted by name.
std::vector<absl::CommandLineFlag*> FlagsOf(const CommandFlagSources& sources);

// Whether `flag` is one of Abseil's own (--flagfile, --fromenv, ...), which every command accepts.
bool IsAbseilFlag(const absl::CommandLineFlag& flag);
// The names of Abseil's own flags, sorted: those of IsAbseilFlag and the usage flags (--help,
// --helpfull, --version, ...), which Abseil's parser serves without registering them.
std::vector<std::string> AbseilFlagNames();

// Whether `path` (a __FILE__ or CommandLineFlag::Filename(), absolute or relative) names
// `file`, a path from the repository's root such as "tools/tls_flags.cc".
bool IsFile(absl::string_view path, absl::string_view file);

// For GRANARY_COMMAND_BORROWS_FLAG: records that the file `path` borrows the flag `name`.
// Returns true.
bool RecordBorrowedFlag(const char* path, const char* name);

}  // namespace granary

#endif  // GRANARY_TOOLS_COMMAND_FLAGS_H_
