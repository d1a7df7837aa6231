// Which flags a command line gives, read the way Abseil's ParseCommandLine reads them, so that
// each subcommand of the `granary` binary can refuse the flags of the others (CheckCommandFlags
// in commands.h): they all live in one global Abseil namespace, so without a check
// `granary run --journal_dir=x` would be accepted and ignored.
#ifndef GRANARY_TOOLS_COMMAND_FLAGS_H_
#define GRANARY_TOOLS_COMMAND_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace granary {

// Abseil's own flags, which every subcommand accepts: help, version and flag-file handling.
const std::vector<absl::string_view>& SharedFlags();

// The names of the flags given in argv[1..argc), in order, up to a "--" (what follows it is not
// parsed as flags): "--name", "--name=value", "-name" and "-name=value" give "name"; "--noname"
// of a boolean flag `name` gives "name"; the argument after "--name" of a non-boolean flag is its
// value, not a flag. Flags in the files named by --flagfile (one "--name=value" a line, nested
// --flagfile followed) and the names listed by --fromenv / --tryfromenv are included too.
// Names Abseil does not know are returned as written (ParseCommandLine reports them).
// Errors: NotFound naming a --flagfile that cannot be read.
absl::StatusOr<std::vector<std::string>> FlagsGiven(int argc, char** argv);

}  // namespace granary

#endif  // GRANARY_TOOLS_COMMAND_FLAGS_H_
