#include "tools/cluster_supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/loopback_port.h"

namespace granary {
namespace {

using std::chrono::milliseconds;

sigset_t SupervisorSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, signal);
  return set;
}

// Whether SIGINT or SIGTERM is waiting to be taken by Run().
bool TerminationPending() {
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  return sigismember(&pending, SIGINT) || sigismember(&pending, SIGTERM);
}

// Replaces a "--port=" argument by the port of `address` (HOST:PORT).
void PinPort(std::vector<std::string>& argv, const std::string& address) {
  for (std::string& arg : argv) {
    if (absl::StartsWith(arg, "--port=")) arg = "--port=" + address.substr(address.rfind(':') + 1);
  }
}

}  // namespace

void BlockSupervisorSignals() {
  const sigset_t set = SupervisorSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

ClusterSupervisor::ClusterSupervisor(ClusterSupervisorOptions options)
    : options_(std::move(options)) {}

ClusterSupervisor::~ClusterSupervisor() = default;  // Each Subprocess kills and reaps its child.

void ClusterSupervisor::Say(const std::string& line) {
  std::fprintf(options_.out, "%s\n", line.c_str());
  std::fflush(options_.out);
}

absl::StatusOr<std::string> ClusterSupervisor::Start(const std::string& kind,
                                                     const std::string& name,
                                                     std::vector<std::string> argv,
                                                     const std::string& note) {
  Member m;
  m.kind = kind;
  m.name = name;
  m.note = note;
  m.argv = std::move(argv);
  return Add(std::move(m));
}

absl::Status ClusterSupervisor::StartOnLoopbackPort(const std::string& kind,
                                                    const std::string& name,
                                                    std::vector<std::string> argv, int port) {
  Member m;
  m.kind = kind;
  m.name = name;
  m.argv = std::move(argv);
  m.loopback_port = port;
  return Add(std::move(m)).status();
}

absl::StatusOr<std::string> ClusterSupervisor::Add(Member m) {
  members_.push_back(std::move(m));
  absl::StatusOr<std::string> address = Launch(members_.back(), "");
  if (!address.ok()) members_.pop_back();
  return address;
}

absl::StatusOr<std::string> ClusterSupervisor::Launch(Member& m, const std::string& suffix) {
  const std::string log = absl::StrCat(options_.log_dir, "/", m.name, ".log");
  m.process = std::make_unique<Subprocess>(m.argv, Subprocess::Stderr::kToFile, log);
  m.started = Clock::now();
  m.restart_at = Clock::time_point::max();
  const auto deadline = m.started + std::chrono::minutes(1);
  std::string address;
  while (address.empty()) {
    if (m.loopback_port == 0) {
      address = m.process->ReadListenAddress(milliseconds(100));
    } else if (AcceptsOnLoopback(m.loopback_port)) {
      address = absl::StrCat("127.0.0.1:", m.loopback_port);
    } else {
      std::this_thread::sleep_for(milliseconds(100));
    }
    if (!address.empty()) break;
    if (TerminationPending()) {
      m.process->Kill(SIGKILL);
      m.process->Wait();
      return absl::CancelledError(absl::StrCat(m.name, " was starting when the cluster stopped"));
    }
    const bool ended = m.process->WaitFor(milliseconds(0)) >= 0;
    if (ended || Clock::now() > deadline) {
      m.process->Kill(SIGKILL);
      m.process->Wait();
      return absl::UnavailableError(absl::StrCat(
          m.name, " (pid ", m.process->pid(), ") did not start: it ",
          ended ? m.process->ExitDescription()
          : m.loopback_port == 0
              ? "announced no address within a minute"
              : absl::StrCat("did not listen on port ", m.loopback_port, " within a minute"),
          " (see ", log, ")"));
    }
  }
  PinPort(m.argv, address);  // A restart comes back at the same address.
  Say(absl::StrCat(m.kind, m.name == m.kind ? "" : " " + m.name, " ", address, " pid ",
                   m.process->pid(), m.note.empty() ? "" : " " + m.note, suffix));
  return address;
}

bool ClusterSupervisor::Dead(const Member& m) {
  return m.process != nullptr && !m.process->running();
}

void ClusterSupervisor::OnDeath(Member& m) {
  if (!options_.restart) {
    Say(absl::StrCat(m.name, " is not restarted: kill -HUP ", ::getpid(),
                     " restarts it (granary cluster --restart restarts dead processes itself)"));
    return;
  }
  const auto now = Clock::now();
  if (m.backoff.count() == 0 || now - m.started >= options_.stable_after) {
    m.backoff = options_.initial_backoff;
  } else {
    m.backoff = std::min(2 * m.backoff, options_.max_backoff);
  }
  m.restart_at = now + m.backoff;
  Say(absl::StrFormat("%s: restarting in %.3g s", m.name, m.backoff.count() / 1000.0));
}

void ClusterSupervisor::ReapExited() {
  for (Member& m : members_) {
    if (m.process == nullptr || !m.process->running()) continue;
    if (m.process->WaitFor(milliseconds(0)) < 0) continue;
    Say(absl::StrCat(m.name, " (pid ", m.process->pid(), ") ", m.process->ExitDescription()));
    OnDeath(m);
  }
}

bool ClusterSupervisor::RestartDue() {
  for (Member& m : members_) {
    if (!Dead(m) || m.restart_at > Clock::now()) continue;
    ++m.restarts;
    absl::StatusOr<std::string> address = Launch(m, absl::StrCat(" (restart ", m.restarts, ")"));
    if (absl::IsCancelled(address.status())) return false;
    if (!address.ok()) {
      Say(std::string(address.status().message()));
      OnDeath(m);
    }
  }
  return true;
}

int ClusterSupervisor::Run() {
  const sigset_t set = SupervisorSignals();
  while (true) {
    ReapExited();
    RestartDue();
    auto next = Clock::time_point::max();
    for (const Member& m : members_) {
      if (Dead(m)) next = std::min(next, m.restart_at);
    }
    siginfo_t info;
    int signal;
    if (next == Clock::time_point::max()) {
      signal = sigwaitinfo(&set, &info);
    } else {
      const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::max(next - Clock::now(), Clock::duration::zero()));
      timespec timeout{static_cast<time_t>(wait.count() / 1000000000),
                       static_cast<long>(wait.count() % 1000000000)};
      signal = sigtimedwait(&set, &info, &timeout);
    }
    if (signal == SIGINT || signal == SIGTERM) {
      Say(absl::StrCat("stopping the cluster (", signal == SIGINT ? "SIGINT" : "SIGTERM", ")"));
      StopAll();
      return signal;
    }
    if (signal == SIGHUP) {
      for (Member& m : members_) {
        if (Dead(m)) m.restart_at = Clock::now();
      }
    }
    // SIGCHLD, a timeout (a restart is due) or EINTR: the loop's top does the work.
  }
}

void ClusterSupervisor::StopAll() {
  // Workers (and anything else) first, then the dispatchers, then the etcd they journal to.
  const auto stop_rank = [](const Member& m) {
    return m.kind == "etcd" ? 2 : m.kind == "dispatcher" ? 1 : 0;
  };
  for (const int rank : {0, 1, 2}) {
    std::vector<Member*> stopping;
    for (Member& m : members_) {
      if (stop_rank(m) == rank && m.process != nullptr && m.process->running()) {
        m.process->Kill(SIGTERM);
        stopping.push_back(&m);
      }
    }
    for (Member* m : stopping) {
      if (m->process->WaitFor(std::chrono::seconds(5)) < 0) {
        m->process->Kill(SIGKILL);
        m->process->Wait();
      }
      Say(absl::StrCat(m->name, " (pid ", m->process->pid(), ") ", m->process->ExitDescription()));
    }
  }
}

}  // namespace granary
