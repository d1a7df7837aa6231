#include "common/subprocess.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace granary {
namespace {

TEST(SubprocessTest, ReadsStdoutAndReportsTheExitCode) {
  Subprocess child({"/bin/sh", "-c", "echo one; echo two; exit 3"});
  EXPECT_EQ(child.ReadLine(), "one");
  EXPECT_EQ(child.ReadAll(), "two\n");
  EXPECT_EQ(child.Wait(), 3);
}

TEST(SubprocessTest, AZeroTimeoutReadsOnlyWhatIsAlreadyThere) {
  Subprocess child({"/bin/sh", "-c", "echo ready; read _"});  // Then waits on its stdin.
  std::string line;
  for (int i = 0; i < 500 && line.empty(); ++i) {  // Up to 5 s for the child to start.
    line = child.ReadLine(std::chrono::milliseconds(0));
    if (line.empty()) ::usleep(10000);
  }
  EXPECT_EQ(line, "ready");
  EXPECT_EQ(child.ReadLine(std::chrono::milliseconds(0)), "") << "nothing more is ready";
  child.Kill(SIGKILL);
  child.Wait();
}

TEST(SubprocessTest, EnvironmentEntriesAreAddedAndOverrideInheritedOnes) {
  ASSERT_EQ(::setenv("GRANARY_SUBPROCESS_TEST_KEPT", "inherited", 1), 0);
  ASSERT_EQ(::setenv("GRANARY_SUBPROCESS_TEST_SET", "inherited", 1), 0);
  Subprocess child({"/bin/sh", "-c",
                    "echo $GRANARY_SUBPROCESS_TEST_KEPT $GRANARY_SUBPROCESS_TEST_SET "
                    "$GRANARY_SUBPROCESS_TEST_NEW"},
                   Subprocess::Stderr::kInherit, "",
                   {"GRANARY_SUBPROCESS_TEST_SET=overridden", "GRANARY_SUBPROCESS_TEST_NEW=new"});
  EXPECT_EQ(child.ReadLine(), "inherited overridden new");
  EXPECT_EQ(child.Wait(), 0);
  ::unsetenv("GRANARY_SUBPROCESS_TEST_KEPT");
  ::unsetenv("GRANARY_SUBPROCESS_TEST_SET");
}

TEST(SubprocessTest, KilledChildReportsTheSignal) {
  Subprocess child({"/bin/sleep", "30"});
  child.Kill(SIGKILL);
  EXPECT_EQ(child.Wait(), 128 + SIGKILL);
  EXPECT_FALSE(child.running());
  EXPECT_EQ(child.ExitDescription(), "was killed by signal 9 (SIGKILL)");
}

// The state letter of every thread of `pid`, from /proc/PID/task/*/stat.
std::string ThreadStates(pid_t pid) {
  std::string states;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t name_end = line.rfind(')');  // The state follows the parenthesized name.
    if (name_end != std::string::npos && name_end + 2 < line.size()) states += line[name_end + 2];
  }
  return states;
}

TEST(SubprocessTest, PauseReturnsOnceEveryThreadHasStopped) {
  // A busy multi-threaded child: python with four spinning threads.
  Subprocess child({"/usr/bin/python3", "-c",
                    "import threading\n"
                    "def spin():\n  while True: pass\n"
                    "for _ in range(4): threading.Thread(target=spin, daemon=True).start()\n"
                    "print('ready', flush=True)\nspin()\n"});
  ASSERT_EQ(child.ReadLine(), "ready");
  child.Pause();
  const std::string states = ThreadStates(child.pid());
  EXPECT_EQ(states.size(), 5u) << states;
  EXPECT_EQ(states.find_first_not_of('T'), std::string::npos) << "thread states: " << states;
  EXPECT_TRUE(child.running());
  child.Kill(SIGKILL);
  EXPECT_EQ(child.Wait(), 128 + SIGKILL);
}

TEST(SubprocessTest, ExitDescriptionTellsAnExitCodeFromASignal) {
  Subprocess child({"/bin/sh", "-c", "exit 137"});
  EXPECT_EQ(child.ExitDescription(), "is running");
  EXPECT_EQ(child.Wait(), 137);
  EXPECT_EQ(child.ExitDescription(), "exited with code 137");
}

TEST(SubprocessTest, AChildDiesWithTheProcessThatStartedIt) {
  // A middle process starts a sleeper, reports its pid and exits without cleaning up (as a
  // SIGKILLed harness would): the kernel must take the sleeper down too.
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    Subprocess sleeper({"/bin/sleep", "30"});
    const pid_t pid = sleeper.pid();
    if (::write(pipe_fds[1], &pid, sizeof(pid)) != sizeof(pid)) ::_exit(1);
    ::_exit(0);  // No destructor runs: only PR_SET_PDEATHSIG can stop the sleeper.
  }
  ::close(pipe_fds[1]);
  pid_t sleeper = -1;
  ASSERT_EQ(::read(pipe_fds[0], &sleeper, sizeof(sleeper)), static_cast<ssize_t>(sizeof(sleeper)));
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(middle, &status, 0), middle);
  ASSERT_GT(sleeper, 0);
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {  // Up to 5 s for init to reap it.
    gone = ::kill(sleeper, 0) != 0 && errno == ESRCH;
    if (!gone) ::usleep(10000);
  }
  EXPECT_TRUE(gone) << "sleeper pid " << sleeper << " outlived the process that started it";
  if (!gone) ::kill(sleeper, SIGKILL);
}

TEST(SubprocessTest, AMissingNetworkNamespaceIsNotStarted) {
  Subprocess child({"/bin/true"}, Subprocess::Stderr::kInherit, "", {},
                   "/run/netns/granary-no-such-namespace");
  EXPECT_EQ(child.pid(), -1);
  EXPECT_FALSE(child.running());
}

// Runs `ip ARGS...` to its end; its exit code.
int RunIp(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/sbin/ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess ip(argv, Subprocess::Stderr::kMergeIntoStdout);
  ip.ReadAll();
  return ip.Wait();
}

TEST(SubprocessTest, TheChildRunsInItsNetworkNamespace) {
  if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  const std::string name = "granary-subprocess-test-" + std::to_string(::getpid());
  ASSERT_EQ(RunIp({"netns", "add", name}), 0);
  const std::string path = "/run/netns/" + name;
  struct stat namespace_file;
  ASSERT_EQ(::stat(path.c_str(), &namespace_file), 0);
  // The child's /proc/self/ns/net is the namespace's inode; its own is not.
  Subprocess inside({"/usr/bin/stat", "-L", "-c", "%i", "/proc/self/ns/net"},
                    Subprocess::Stderr::kInherit, "", {}, path);
  EXPECT_EQ(inside.ReadLine(), std::to_string(namespace_file.st_ino));
  EXPECT_EQ(inside.Wait(), 0);
  Subprocess outside({"/usr/bin/stat", "-L", "-c", "%i", "/proc/self/ns/net"});
  EXPECT_NE(outside.ReadLine(), std::to_string(namespace_file.st_ino));
  EXPECT_EQ(outside.Wait(), 0);
  EXPECT_EQ(RunIp({"netns", "del", name}), 0);
}

}  // namespace
}  // namespace granary
