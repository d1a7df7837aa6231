#include "common/ledger_env.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/fault_injection_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

// Name -> content of the files in `dir`.
std::map<std::string, std::string> Files(const std::string& dir) {
  std::map<std::string, std::string> out;
  const std::vector<std::string> names = Env::Default()->GetChildren(dir).value();
  for (const std::string& name : names) {
    out[name] = ReadFileToString(Env::Default(), dir + "/" + name).value();
  }
  return out;
}

// Runs a seeded script of file operations through `env` on the files of `dir`: writes,
// syncs, renames, deletes, directory syncs. The same seed makes the same script.
void RunScript(uint64_t seed, Env* env, const std::string& dir) {
  std::mt19937_64 draws(seed);
  const auto name = [&] { return absl::StrCat(dir, "/f", draws() % 4); };
  std::unique_ptr<WritableFile> open;
  for (int step = 0; step < 60; ++step) {
    switch (draws() % 6) {
      case 0:  // (re)create a file and keep it open
        if (open != nullptr) {
          ASSERT_TRUE(open->Close().ok());
        }
        open = env->NewWritableFile(name()).value();
        break;
      case 1:
        if (open != nullptr) {
          ASSERT_TRUE(open->Append(std::string(1 + draws() % 6000, 'a' + step % 26)).ok());
        }
        break;
      case 2:
        if (open != nullptr) {
          ASSERT_TRUE(open->Sync().ok());
        }
        break;
      case 3: {  // rename a closed file
        if (open != nullptr) {
          ASSERT_TRUE(open->Close().ok());
        }
        open.reset();
        const std::string from = name();
        if (env->FileExists(from)) {
          ASSERT_TRUE(env->RenameFile(from, name()).ok());
        }
        break;
      }
      case 4: {
        if (open != nullptr) {
          ASSERT_TRUE(open->Close().ok());
        }
        open.reset();
        const std::string victim = name();
        if (env->FileExists(victim)) {
          ASSERT_TRUE(env->DeleteFile(victim).ok());
        }
        break;
      }
      case 5:
        ASSERT_TRUE(env->SyncDir(dir).ok());
        break;
    }
  }
  if (open != nullptr) {
    ASSERT_TRUE(open->Close().ok());
  }
}

// The ledger of a LedgerEnv, replayed after the fact, drops exactly what FaultInjectionEnv
// drops in-process for the same operations: both apply common/durability_model.h.
TEST(LedgerEnvTest, PowerLossFromTheLedgerMatchesFaultInjectionEnv) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    for (const bool torn : {false, true}) {
      SCOPED_TRACE(absl::StrCat("seed ", seed, torn ? ", torn" : ""));
      testing::ScopedTempDir root;
      const std::string faked = root.Join("faked");
      const std::string ledgered = root.Join("ledgered");
      ASSERT_TRUE(Env::Default()->CreateDirs(faked).ok());
      ASSERT_TRUE(Env::Default()->CreateDirs(ledgered).ok());
      FaultInjectionEnv fault_env(Env::Default());
      RunScript(seed, &fault_env, faked);
      const std::string ledger_path = root.Join("ledger");
      {
        std::unique_ptr<SyncLedger> ledger = SyncLedger::Open(ledger_path).value();
        LedgerEnv ledger_env(Env::Default(), ledger.get());
        RunScript(seed, &ledger_env, ledgered);
      }
      ASSERT_EQ(Files(faked), Files(ledgered));  // the same script ran
      const std::optional<uint64_t> torn_seed = torn ? std::optional<uint64_t>(seed) : std::nullopt;
      const PowerLossReport in_process = fault_env.DropUnsyncedData(torn_seed).value();
      const PowerLossReport replayed = ApplyPowerLoss({ledger_path}, torn_seed).value();
      EXPECT_EQ(Files(faked), Files(ledgered));
      EXPECT_EQ(in_process.Describe(), replayed.Describe());
    }
  }
}

TEST(LedgerEnvTest, ServerFileEnvIsTheDefaultEnvWithoutTheVariable) {
  ::unsetenv(kSyncLedgerEnvironmentVariable);
  const std::unique_ptr<ServerFileEnv> files = ServerFileEnv::FromEnvironment().value();
  EXPECT_EQ(files->env(), Env::Default());
  EXPECT_EQ(files->ledger(), nullptr);
}

TEST(LedgerEnvTest, ServerFileEnvRecordsInTheLedgerTheVariableNames) {
  testing::ScopedTempDir dir;
  ::setenv(kSyncLedgerEnvironmentVariable, dir.Join("ledger").c_str(), 1);
  const std::unique_ptr<ServerFileEnv> files = ServerFileEnv::FromEnvironment().value();
  ::unsetenv(kSyncLedgerEnvironmentVariable);
  ASSERT_NE(files->ledger(), nullptr);
  EXPECT_EQ(files->ledger()->path(), dir.Join("ledger"));
  ASSERT_TRUE(WriteStringToFile(files->env(), dir.Join("data"), "x", /*sync=*/true).ok());
  const std::string ledger = ReadFileToString(Env::Default(), dir.Join("ledger")).value();
  EXPECT_THAT(ledger, ::testing::HasSubstr(absl::StrCat("create ", dir.Join("data"), "\n")));
  EXPECT_THAT(ledger, ::testing::HasSubstr(absl::StrCat("sync 1 ", dir.Join("data"), "\n")));
}

TEST(LedgerEnvTest, ServerFileEnvNamesALedgerItCannotOpen) {
  ::setenv(kSyncLedgerEnvironmentVariable, "/nonexistent-dir/ledger", 1);
  const absl::StatusOr<std::unique_ptr<ServerFileEnv>> files = ServerFileEnv::FromEnvironment();
  ::unsetenv(kSyncLedgerEnvironmentVariable);
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(), ::testing::HasSubstr("/nonexistent-dir/ledger"));
  EXPECT_THAT(files.status().message(), ::testing::HasSubstr(kSyncLedgerEnvironmentVariable));
}

}  // namespace
}  // namespace granary
