// Each subcommand accepts only its own flags (issue 13 defect 15): the lists in Commands() are
// complete and exist, and FlagsGiven reads a command line the way Abseil does.
#include "tools/commands.h"

#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"
#include "tools/command_flags.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// argv with a program name in front of `args`.
class Argv {
 public:
  explicit Argv(std::vector<std::string> args) : args_(std::move(args)) {
    args_.insert(args_.begin(), "granary test");
    for (std::string& a : args_) pointers_.push_back(a.data());
  }
  int argc() { return static_cast<int>(pointers_.size()); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<char*> pointers_;
};

std::vector<std::string> Given(std::vector<std::string> args) {
  Argv argv(std::move(args));
  absl::StatusOr<std::vector<std::string>> given = FlagsGiven(argv.argc(), argv.argv());
  EXPECT_TRUE(given.ok()) << given.status();
  return given.value_or(std::vector<std::string>{});
}

absl::Status Check(absl::string_view command, std::vector<std::string> args) {
  const Command* c = FindCommand(command);
  if (c == nullptr) return absl::NotFoundError(std::string(command));
  Argv argv(std::move(args));
  return CheckCommandFlags(*c, argv.argc(), argv.argv());
}

TEST(CommandsTest, EveryListedFlagExists) {
  for (const Command& command : Commands()) {
    for (const absl::string_view flag : command.flags) {
      EXPECT_NE(absl::FindCommandLineFlag(flag), nullptr)
          << "granary " << command.name << " lists --" << flag << ", which is not a flag";
    }
  }
}

TEST(CommandsTest, EveryFlagOfTheToolsIsSomeCommandsFlag) {
  int checked = 0;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::StrContains(flag->Filename(), "tools/")) continue;
    ++checked;
    bool listed = false;
    for (const Command& command : Commands()) {
      for (const absl::string_view accepted : command.flags) listed |= accepted == name;
    }
    EXPECT_TRUE(listed) << "--" << name << " (" << flag->Filename()
                        << ") is accepted by no command: add it to Commands() in commands.cc";
  }
  EXPECT_GT(checked, 40) << "the flags of tools/ are not linked in";
}

TEST(CommandsTest, HelpListsTheCommandsOwnFlags) {
  const std::string help = CommandFlagsHelp(*FindCommand("journal"));
  EXPECT_THAT(help, HasSubstr("flags of granary journal:\n  --journal_dir ("));
  EXPECT_THAT(help, ::testing::Not(HasSubstr("--worker_id")));
  EXPECT_THAT(help, HasSubstr("--helpfull"));
}

TEST(FlagsGivenTest, ReadsTheFormsAbseilAccepts) {
  // --standby is boolean (worker), --dispatcher and --epochs are not.
  EXPECT_THAT(Given({"dump", "--journal_dir=j", "-epochs=3", "--nostandby", "--dispatcher",
                     "-not-a-flag", "positional", "--standby", "-7"}),
              ElementsAre("journal_dir", "epochs", "standby", "dispatcher", "standby", "7"));
}

TEST(FlagsGivenTest, StopsAtDoubleDash) {
  EXPECT_THAT(Given({"--workers=2", "--", "--window_bytes=1"}), ElementsAre("workers"));
}

TEST(FlagsGivenTest, ReadsFlagFilesAndFromEnv) {
  testing::ScopedTempDir dir;
  const std::string inner = dir.Join("inner");
  const std::string outer = dir.Join("outer");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), inner, "--journal_dir=j\n", false).ok());
  ASSERT_TRUE(WriteStringToFile(Env::Default(), outer,
                                "# comment\n\n  --epochs=2\n--flagfile=" + inner + "\n", false)
                  .ok());
  EXPECT_THAT(
      Given({"--flagfile", outer, "--fromenv=seed,port"}),
      ElementsAre("flagfile", "epochs", "flagfile", "journal_dir", "fromenv", "seed", "port"));
  Argv missing({"--flagfile=" + dir.Join("missing")});
  absl::StatusOr<std::vector<std::string>> given = FlagsGiven(missing.argc(), missing.argv());
  EXPECT_EQ(given.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(given.status().message(), HasSubstr(dir.Join("missing")));
}

TEST(CheckCommandFlagsTest, AcceptsOwnAndSharedFlags) {
  EXPECT_TRUE(
      Check("run", {"--dispatcher", "h:1", "--pipeline=p", "--epochs=2", "--plugin=x"}).ok());
  EXPECT_TRUE(Check("journal", {"dump", "--journal_dir=j", "--helpfull"}).ok());
  EXPECT_TRUE(Check("cluster", {"--workers=2", "--standby", "1", "--", "--window_bytes=1"}).ok());
  EXPECT_TRUE(Check("worker", {"--nostandby", "--dispatcher=h:1"}).ok());
}

TEST(CheckCommandFlagsTest, RefusesAnotherCommandsFlagByName) {
  const absl::Status s = Check("run", {"--dispatcher=h:1", "--journal_dir=x"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--journal_dir is not a flag of granary run (it belongs to granary dispatcher, "
            "granary journal)");
  EXPECT_THAT(Check("local", {"--pipeline", "p", "--noformat_and_not_a_flag"}).message(),
              HasSubstr("--noformat_and_not_a_flag is not a flag of granary local"));
  EXPECT_THAT(Check("status", {"--nostandby"}).message(),
              HasSubstr("--standby is not a flag of granary status (it belongs to granary "
                        "worker)"));
}

TEST(CheckCommandFlagsTest, LooksIntoFlagFiles) {
  testing::ScopedTempDir dir;
  const std::string file = dir.Join("flags");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), file, "--worker_id=w\n", false).ok());
  EXPECT_THAT(Check("dispatcher", {"--flagfile=" + file}).message(),
              HasSubstr("--worker_id is not a flag of granary dispatcher"));
}

}  // namespace
}  // namespace granary
