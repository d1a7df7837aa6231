// The shared-memory transport's two ends in one process: a worker's pool of memfd segments and
// its ShmServer, and a client's ShmClient.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/buffer_pool.h"
#include "transport/shm_backing.h"
#include "transport/shm_client.h"
#include "transport/shm_protocol.h"
#include "transport/shm_server.h"
#include "transport/shm_test_util.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

class ShmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!MemfdBacking::Available()) GTEST_SKIP() << "no memfd_create on this kernel";
    address_ = testing::UniqueWorkerAddress("shm-test");
    auto server = ShmServer::Start(address_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    BufferPoolOptions options;
    options.backing = std::make_shared<MemfdBacking>();
    pool_ = std::make_unique<BufferPool>(options);
  }

  BufferRef Image(size_t size, char fill) {
    auto image = pool_->Allocate(size);
    EXPECT_TRUE(image.ok()) << image.status();
    std::memset((*image)->data(), fill, size);
    return *image;
  }

  std::string address_;
  std::unique_ptr<ShmServer> server_;
  std::unique_ptr<BufferPool> pool_;
};

// A client maps what the worker holds for its session, sees the worker's bytes in place, and
// releasing its view releases the worker's hold, so the segment is reused.
TEST_F(ShmTest, AClientMapsAHeldSegmentAndReleasesIt) {
  auto client = ShmClient::Connect(address_, server_->nonce());
  ASSERT_TRUE(client.ok()) << client.status();
  BufferRef image = Image(1 << 20, 'x');
  const uint64_t segment = image->segment_id();
  ASSERT_NE(segment, 0u);
  ASSERT_TRUE(server_->Hold((*client)->session(), image));
  EXPECT_EQ(server_->stats().holds, 1);
  image.reset();  // The worker's window moved on: only the session holds it now.
  EXPECT_EQ(pool_->stats().live_bytes, BufferPool::SizeClass(1 << 20));

  absl::string_view bytes;
  auto owner = (*client)->Take(segment, 1 << 20, &bytes);
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_EQ(bytes.size(), 1u << 20);
  EXPECT_EQ(bytes[0], 'x');
  EXPECT_EQ(bytes[(1 << 20) - 1], 'x');
  owner->reset();
  // The release is processed by the server's thread.
  for (int i = 0; i < 500 && server_->stats().holds > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(server_->stats().holds, 0);
  EXPECT_EQ(pool_->stats().live_bytes, 0u) << "back in the pool for the next element";
}

// The kilobytes of the mapping that starts at `start` that are this process's own copies
// (/proc/self/smaps, "Anonymous"); -1 when there is no such mapping.
int64_t PrivateCopiedKb(const void* start) {
  std::ifstream smaps("/proc/self/smaps");
  const std::string prefix = absl::StrCat(absl::Hex(reinterpret_cast<uintptr_t>(start)), "-");
  bool in_mapping = false;
  for (std::string line; std::getline(smaps, line);) {
    if (absl::StartsWith(line, prefix)) {
      in_mapping = true;
    } else if (in_mapping && absl::StartsWith(line, "Anonymous:")) {
      int64_t kb = -1;
      return absl::SimpleAtoi(absl::StripAsciiWhitespace(
                                  absl::StripSuffix(absl::StripPrefix(line, "Anonymous:"), "kB")),
                              &kb)
                 ? kb
                 : -1;
    }
  }
  return -1;
}

// Issue 30: the trainer may write into what it received (PyTorch's in-place ops do). The
// mapping is copy-on-write: nothing is copied when it is made, a write copies only the page it
// touches, and the worker's segment — which it reuses for later elements, and other sessions
// map — never changes.
TEST_F(ShmTest, WritesIntoAViewStayInTheClient) {
  auto client = ShmClient::Connect(address_, server_->nonce());
  ASSERT_TRUE(client.ok()) << client.status();
  BufferRef image = Image(1 << 20, 'x');
  ASSERT_TRUE(server_->Hold((*client)->session(), image));
  absl::string_view bytes;
  auto owner = (*client)->Take(image->segment_id(), 1 << 20, &bytes);
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_EQ(PrivateCopiedKb(bytes.data()), 0) << "mapping the segment copied pages";

  char* view = const_cast<char*>(bytes.data());
  view[0] = 'y';
  view[(1 << 20) - 1] = 'z';
  EXPECT_EQ(bytes[0], 'y');
  EXPECT_EQ(bytes[(1 << 20) - 1], 'z');
  EXPECT_EQ(bytes[1], 'x');
  EXPECT_EQ(PrivateCopiedKb(bytes.data()), 2 * ::sysconf(_SC_PAGESIZE) / 1024)
      << "a write copies the page it touches, and only that one";
  EXPECT_EQ(image->data()[0], 'x') << "the write reached the worker's segment";
  EXPECT_EQ(image->data()[(1 << 20) - 1], 'x') << "the write reached the worker's segment";

  // Another session maps the worker's bytes, not this one's writes.
  auto other = ShmClient::Connect(address_, server_->nonce());
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(server_->Hold((*other)->session(), image));
  absl::string_view other_bytes;
  auto other_owner = (*other)->Take(image->segment_id(), 1 << 20, &other_bytes);
  ASSERT_TRUE(other_owner.ok()) << other_owner.status();
  EXPECT_EQ(other_bytes[0], 'x');
  EXPECT_EQ(other_bytes[(1 << 20) - 1], 'x');
}

TEST_F(ShmTest, ASegmentTheSessionDoesNotHoldIsNotFound) {
  auto client = ShmClient::Connect(address_, server_->nonce());
  ASSERT_TRUE(client.ok());
  BufferRef image = Image(1 << 20, 'x');
  absl::string_view bytes;
  auto owner = (*client)->Take(image->segment_id(), 10, &bytes);
  EXPECT_TRUE(absl::IsNotFound(owner.status())) << owner.status();
  // Another session's hold is not ours either.
  auto other = ShmClient::Connect(address_, server_->nonce());
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(server_->Hold((*other)->session(), image));
  EXPECT_TRUE(absl::IsNotFound((*client)->Take(image->segment_id(), 10, &bytes).status()));
  EXPECT_FALSE(server_->Hold(12345, image)) << "an unknown session holds nothing";
  EXPECT_FALSE((*client)->broken());
}

TEST_F(ShmTest, ASizePastTheSegmentIsDataLoss) {
  auto client = ShmClient::Connect(address_, server_->nonce());
  ASSERT_TRUE(client.ok());
  BufferRef image = Image(1 << 20, 'x');
  ASSERT_TRUE(server_->Hold((*client)->session(), image));
  absl::string_view bytes;
  auto owner = (*client)->Take(image->segment_id(), size_t{1} << 40, &bytes);
  EXPECT_TRUE(absl::IsDataLoss(owner.status())) << owner.status();
}

// A client that dies (its socket closes) takes its session's holds with it.
TEST_F(ShmTest, AClosedSessionReleasesItsHolds) {
  BufferRef image = Image(1 << 20, 'x');
  {
    auto client = ShmClient::Connect(address_, server_->nonce());
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE(server_->Hold((*client)->session(), image));
    ASSERT_TRUE(server_->Hold((*client)->session(), image));
    EXPECT_EQ(image.use_count(), 3);
  }
  // The session is counted closed before its thread drops the holds: wait for both (a flake
  // under load when only the count was awaited).
  for (int i = 0; i < 500 && (server_->stats().sessions > 0 || image.use_count() > 1); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(server_->stats().sessions, 0);
  EXPECT_EQ(image.use_count(), 1);
}

// A mapping stays valid after the worker is gone (its server and its pool), and nothing of the
// transport is left in /dev/shm at any point.
TEST_F(ShmTest, AViewOutlivesTheWorkerAndNothingIsLeftInDevShm) {
  const std::set<std::string> before = testing::DevShmEntries();
  auto client = ShmClient::Connect(address_, server_->nonce());
  ASSERT_TRUE(client.ok());
  BufferRef image = Image(3 << 20, 'q');
  ASSERT_TRUE(server_->Hold((*client)->session(), image));
  absl::string_view bytes;
  auto owner = (*client)->Take(image->segment_id(), 3 << 20, &bytes);
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_EQ(testing::DevShmEntries(), before);
  image.reset();
  server_.reset();
  pool_.reset();
  EXPECT_EQ(bytes[(3 << 20) - 1], 'q');
  EXPECT_EQ(bytes[12345], 'q');
  owner->reset();  // The release has nowhere to go: no error, nothing thrown.
  EXPECT_EQ(testing::DevShmEntries(), before);
}

// A worker that died or restarted (at the same address) knows nothing of the old session: the
// client must see its channel broken without having to fail a fetch first, so that the reader
// connects anew instead of getting everything by bytes (seen in the demo after a restart).
TEST_F(ShmTest, ASessionWhoseWorkerWentAwayIsBroken) {
  auto client = ShmClient::Connect(address_, server_->nonce());
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_FALSE((*client)->broken());
  server_.reset();
  EXPECT_TRUE((*client)->broken());
  auto server = ShmServer::Start(address_);  // the restarted worker
  ASSERT_TRUE(server.ok()) << server.status();
  auto again = ShmClient::Connect(address_, (*server)->nonce());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE((*again)->broken());
}

// Issue 15: segments hold every task's elements, so a process of another user on the worker's
// host is disconnected before it learns a session (it reads over TCP, against capabilities).
TEST_F(ShmTest, AProcessOfAnotherUserGetsNoSession) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a child as another user";
  socklen_t length = 0;
  const sockaddr_un address = ShmSocketAddress(address_, server_->nonce(), &length);
  const auto hello_bytes_as = [&](uid_t uid) -> int {
    const pid_t child = ::fork();
    if (child == 0) {  // Raw system calls only: the parent has threads.
      if (::setuid(uid) != 0) ::_exit(100);
      const int s = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
      if (s < 0 || ::connect(s, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
        ::_exit(101);
      }
      char byte;
      const ssize_t n = ::recv(s, &byte, 1, 0);
      ::_exit(n > 0 ? 1 : 0);  // 1: the worker said hello (a session); 0: it hung up
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(hello_bytes_as(65534), 0) << "uid 65534 (nobody) was given a session";
  EXPECT_EQ(hello_bytes_as(0), 1) << "the worker's own user was refused";
}

TEST(ShmConnectTest, NoWorkerOnThisHostIsUnavailable) {
  auto client = ShmClient::Connect("10.255.255.1:1", "0123456789abcdef");
  EXPECT_TRUE(absl::IsUnavailable(client.status())) << client.status();
  EXPECT_THAT(client.status().message(),
              HasSubstr("shared-memory socket @granary-shm:0123456789abcdef:10.255.255.1:1 of "
                        "worker 10.255.255.1:1: nothing listens there on this host"));
}

// Issue 30: a local process that bound the worker's old-style name ("granary-shm:<address>")
// first no longer keeps the worker from serving shared memory: the name carries a nonce the
// worker draws, so two starts at one address even get two names.
TEST(ShmConnectTest, TheOldStyleNameTakenFirstDoesNotStopTheWorker) {
  if (!MemfdBacking::Available()) GTEST_SKIP() << "no memfd_create on this kernel";
  const std::string address = testing::UniqueWorkerAddress("shm-test");
  testing::ShmSquatter squatter("granary-shm:" + address, std::nullopt);
  ASSERT_TRUE(squatter.bound());
  auto server = ShmServer::Start(address);
  ASSERT_TRUE(server.ok()) << server.status();
  auto second = ShmServer::Start(address);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE((*server)->nonce(), (*second)->nonce());
  EXPECT_THAT((*server)->nonce(), ::testing::MatchesRegex("[0-9a-f]{16}"));
  auto client = ShmClient::Connect(address, (*server)->nonce());
  ASSERT_TRUE(client.ok()) << client.status();
}

// Issue 30: a listener that accepts and never says hello (it bound the name of a worker that
// died) costs the client one hello timeout, then an error naming the socket — not a hang.
TEST(ShmConnectTest, AListenerThatNeverSaysHelloTimesOut) {
  const std::string address = testing::UniqueWorkerAddress("shm-test");
  const std::string nonce = "00000000deadbeef";
  testing::ShmSquatter squatter(ShmSocketName(address, nonce).substr(1), std::nullopt);
  ASSERT_TRUE(squatter.bound());
  const absl::Time start = absl::Now();
  auto client = ShmClient::Connect(address, nonce);
  const absl::Duration waited = absl::Now() - start;
  EXPECT_TRUE(absl::IsDeadlineExceeded(client.status())) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr(ShmSocketName(address, nonce)));
  EXPECT_THAT(client.status().message(), HasSubstr("sent no hello within 1s"));
  EXPECT_GE(waited, ShmClient::kHelloTimeout);
  EXPECT_LT(waited, absl::Seconds(5)) << "the client waited for the hello far past its timeout";
}

// A listener whose backlog is full (a local process bound a dead worker's name with
// listen(fd, 0), connected once itself and never accepts) would keep a blocking connect()
// waiting forever; the client's fails at once, naming the socket.
TEST(ShmConnectTest, AListenerWithAFullBacklogFailsAtOnce) {
  const std::string address = testing::UniqueWorkerAddress("shm-test");
  const std::string nonce = "00000000f0110f11";
  socklen_t length;
  const sockaddr_un name = ShmSocketAddress(address, nonce, &length);
  const sockaddr* name_address = reinterpret_cast<const sockaddr*>(&name);
  const int listener = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::bind(listener, name_address, length), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(listener, 0), 0) << std::strerror(errno);
  const int filler = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ASSERT_EQ(::connect(filler, name_address, length), 0) << std::strerror(errno);
  const int probe = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ASSERT_NE(::connect(probe, name_address, length), 0) << "the backlog is not full";
  ASSERT_EQ(errno, EAGAIN) << std::strerror(errno);
  ::close(probe);

  absl::Notification done;
  absl::StatusOr<std::shared_ptr<ShmClient>> client;
  absl::Duration waited;
  std::thread connecting([&] {
    const absl::Time start = absl::Now();
    client = ShmClient::Connect(address, nonce);
    waited = absl::Now() - start;
    done.Notify();
  });
  // The watchdog: closing the listener wakes a connect() waiting on its backlog.
  const bool returned = done.WaitForNotificationWithTimeout(absl::Seconds(5));
  ::close(listener);
  connecting.join();
  ::close(filler);
  ASSERT_TRUE(returned) << "Connect still waited on the full backlog after 5 s";
  EXPECT_TRUE(absl::IsUnavailable(client.status())) << client.status();
  EXPECT_THAT(client.status().message(),
              HasSubstr(absl::StrCat("shared-memory socket ", ShmSocketName(address, nonce),
                                     " of worker ", address, ": the listener's backlog is full")));
  EXPECT_LT(waited, absl::Seconds(2));
}

// A failing random source (here a seccomp filter makes getrandom fail ENOSYS, as on a kernel
// without it) is an error naming it, not an endless loop; the worker then serves no shared
// memory. In a child process, which the filter stays confined to.
TEST(ShmNonceTest, AFailingRandomSourceIsAnError) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) {
    ::alarm(5);  // ends a NewShmNonce that loops
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getrandom, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{sizeof(filter) / sizeof(filter[0]), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
      ::_exit(10);
    }
    const absl::StatusOr<std::string> nonce = NewShmNonce();
    if (nonce.ok()) ::_exit(11);
    if (!absl::IsUnavailable(nonce.status()) ||
        !absl::StrContains(nonce.status().message(), "getrandom: Function not implemented")) {
      ::_exit(12);
    }
    const auto server = ShmServer::Start(testing::UniqueWorkerAddress("shm-test"));
    ::_exit(server.ok() ? 13 : absl::StrContains(server.status().message(), "getrandom") ? 0 : 14);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_FALSE(WIFSIGNALED(status))
      << "NewShmNonce looped until the alarm (signal " << WTERMSIG(status) << ")";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: no seccomp filter; 11: a nonce without getrandom; 12: NewShmNonce's error does "
         "not name getrandom's ENOSYS; 13: ShmServer::Start succeeded; 14: its error does not "
         "name getrandom";
}

// Issue 30: the hello must name the process that listens (SO_PEERCRED); one naming another
// pid is not the worker's, and its session is refused.
TEST(ShmConnectTest, AHelloNamingAnotherProcessIsRefused) {
  const std::string address = testing::UniqueWorkerAddress("shm-test");
  const std::string nonce = "00000000feedface";
  ShmMessage hello = testing::Hello(7, static_cast<uint64_t>(::getpid()) + 1);
  testing::ShmSquatter squatter(ShmSocketName(address, nonce).substr(1), hello);
  ASSERT_TRUE(squatter.bound());
  auto client = ShmClient::Connect(address, nonce);
  EXPECT_TRUE(absl::IsPermissionDenied(client.status())) << client.status();
  EXPECT_THAT(client.status().message(),
              HasSubstr(absl::StrCat("the hello names process ", ::getpid() + 1, " but process ",
                                     ::getpid(), " listens")));
  // The same listener naming itself is accepted: the check is the pid, nothing else.
  hello.b = static_cast<uint64_t>(::getpid());
  testing::ShmSquatter honest(ShmSocketName(address, "00000000cafef00d").substr(1), hello);
  ASSERT_TRUE(honest.bound());
  auto accepted = ShmClient::Connect(address, "00000000cafef00d");
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  EXPECT_EQ((*accepted)->session(), 7u);
}

}  // namespace
}  // namespace granary
