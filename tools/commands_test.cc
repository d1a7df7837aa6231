// Each subcommand accepts only its own flags (issue 13 defect 15), derived from Abseil's flag
// registry (issue 31): every flag of tools/ is some command's, a command refuses the others' by
// name (on the command line, in --flagfile, from --fromenv), and --help lists exactly the flags
// the command accepts.
#include "tools/commands.h"

#include <stdlib.h>

#include <set>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"
#include "tools/command_flags.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// argv with "granary <command>" in front of `args`.
class Argv {
 public:
  Argv(absl::string_view command, std::vector<std::string> args) : args_(std::move(args)) {
    args_.insert(args_.begin(), absl::StrCat("granary ", command));
    for (std::string& a : args_) pointers_.push_back(a.data());
  }
  int argc() { return static_cast<int>(pointers_.size()); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<char*> pointers_;
};

// Parses `args` with Abseil as granary `command` would, then checks them.
absl::Status Check(absl::string_view command, std::vector<std::string> args) {
  const Command* c = FindCommand(command);
  if (c == nullptr) return absl::NotFoundError(std::string(command));
  Argv argv(command, std::move(args));
  absl::ParseCommandLine(argv.argc(), argv.argv());
  return CheckFlagsGiven(*c);
}

std::set<std::string> NamesOf(const std::vector<absl::CommandLineFlag*>& flags) {
  std::set<std::string> names;
  for (const absl::CommandLineFlag* flag : flags) names.insert(std::string(flag->Name()));
  return names;
}

// The flag names of a CommandFlagsHelp: its lines "  --name (".
std::set<std::string> NamesInHelp(absl::string_view help) {
  std::set<std::string> names;
  for (const absl::string_view line : absl::StrSplit(help, '\n')) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "  --")) continue;
    names.insert(std::string(rest.substr(0, rest.find(" ("))));
  }
  return names;
}

TEST(CommandsTest, EveryFlagOfTheToolsIsSomeCommandsFlag) {
  int checked = 0;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::StrContains(flag->Filename(), "tools/")) continue;
    ++checked;
    bool accepted = false;
    for (const Command& command : Commands()) {
      accepted |= NamesOf(CommandFlags(command)).count(std::string(name)) > 0;
    }
    EXPECT_TRUE(accepted) << "--" << name << " (" << flag->Filename()
                          << ") is accepted by no command: define it in a tools/*_command.cc, or "
                             "name its file among a command's flag_groups in commands.cc";
  }
  EXPECT_GT(checked, 40) << "the flags of tools/ are not linked in";
}

TEST(CommandsTest, CommandsHaveTheirOwnBorrowedAndGroupFlags) {
  EXPECT_EQ(NamesOf(CommandFlags(*FindCommand("journal"))), std::set<std::string>{"journal_dir"});
  const std::set<std::string> worker = NamesOf(CommandFlags(*FindCommand("worker")));
  for (const char* flag : {"worker_id", "dispatcher", "tls_cert", "port", "metrics_port"}) {
    EXPECT_EQ(worker.count(flag), 1) << flag;
  }
  const std::set<std::string> cluster = NamesOf(CommandFlags(*FindCommand("cluster")));
  EXPECT_EQ(cluster.count("insecure"), 1);
  EXPECT_EQ(cluster.count("tls_cert"), 0);
  EXPECT_THAT(AbseilFlagNames(), ::testing::IsSupersetOf({"flagfile", "fromenv", "helpfull"}));
}

TEST(CommandsTest, HelpListsTheCommandsOwnFlags) {
  const std::string help = CommandFlagsHelp(*FindCommand("journal"));
  EXPECT_THAT(help, HasSubstr("flags of granary journal:\n  --journal_dir ("));
  EXPECT_THAT(help, ::testing::Not(HasSubstr("--worker_id")));
  EXPECT_THAT(help, HasSubstr("--helpfull"));
}

// For every command and every flag of the binary: given on its command line (at its default
// value), the flag is accepted exactly when the command's --help lists it.
TEST(CommandsTest, HelpListsExactlyTheFlagsTheCommandAccepts) {
  for (const Command& command : Commands()) {
    const std::set<std::string> listed = NamesInHelp(CommandFlagsHelp(command));
    EXPECT_EQ(listed, NamesOf(CommandFlags(command))) << command.name;
    for (const auto& [name, flag] : absl::GetAllFlags()) {
      if (IsAbseilFlag(*flag)) continue;
      const absl::Status status =
          Check(command.name, {absl::StrCat("--", name, "=", flag->DefaultValue())});
      EXPECT_EQ(status.ok(), listed.count(std::string(name)) > 0)
          << "granary " << command.name << " --" << name << ": " << status;
    }
  }
}

TEST(CheckFlagsGivenTest, AcceptsOwnAndAbseilsFlags) {
  testing::ScopedTempDir dir;
  const std::string empty = dir.Join("empty");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), empty, "", false).ok());
  EXPECT_TRUE(
      Check("run", {"--dispatcher", "h:1", "--pipeline=p", "--epochs=2", "--plugin=x"}).ok());
  EXPECT_TRUE(Check("journal", {"dump", "--journal_dir=j", "--flagfile=" + empty}).ok());
  EXPECT_TRUE(Check("cluster", {"--workers=2", "--", "--window_bytes=1"}).ok());
  EXPECT_TRUE(Check("worker", {"--nostandby", "--dispatcher=h:1"}).ok());
}

TEST(CheckFlagsGivenTest, RefusesAnotherCommandsFlagNamingBoth) {
  const absl::Status s = Check("run", {"--dispatcher=h:1", "--journal_dir=x"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--journal_dir is not a flag of granary run (it belongs to granary dispatcher, "
            "granary journal)");
  EXPECT_EQ(Check("status", {"--nostandby"}).message(),
            "--standby is not a flag of granary status (it belongs to granary worker)");
  EXPECT_EQ(Check("cluster", {"--tls_cert=c"}).message(),
            "--tls_cert is not a flag of granary cluster (it belongs to granary dispatcher, "
            "granary worker, granary run, granary precache, granary status, granary scale)");
}

TEST(CheckFlagsGivenTest, LooksIntoFlagFilesAndTheEnvironment) {
  testing::ScopedTempDir dir;
  const std::string inner = dir.Join("inner");
  const std::string outer = dir.Join("outer");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), inner, "--worker_id=w\n", false).ok());
  ASSERT_TRUE(
      WriteStringToFile(Env::Default(), outer, "--journal_dir=j\n--flagfile=" + inner + "\n", false)
          .ok());
  EXPECT_EQ(Check("dispatcher", {"--flagfile=" + outer}).message(),
            "--worker_id is not a flag of granary dispatcher (it belongs to granary worker)");
  setenv("FLAGS_window_bytes", "1", /*overwrite=*/1);
  EXPECT_EQ(Check("run", {"--fromenv=window_bytes"}).message(),
            "--window_bytes is not a flag of granary run (it belongs to granary worker)");
  unsetenv("FLAGS_window_bytes");
}

TEST(ParseCommandFlagsTest, ExitsNamingTheFlag) {
  Argv other("run", {"--dispatcher=h:1", "--journal_dir=x"});
  EXPECT_EXIT(ParseCommandFlags(other.argc(), other.argv()), ::testing::ExitedWithCode(2),
              "granary run: --journal_dir is not a flag of granary run \\(it belongs to "
              "granary dispatcher, granary journal\\)");
  Argv unknown("local", {"--pipeline", "p", "--noformat_and_not_a_flag"});
  EXPECT_EXIT(ParseCommandFlags(unknown.argc(), unknown.argv()), ::testing::ExitedWithCode(1),
              "noformat_and_not_a_flag");
}

}  // namespace
}  // namespace granary
