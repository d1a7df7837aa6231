#include "faultinject/netns.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "glog/logging.h"

namespace granary {
namespace {

constexpr char kIp[] = "/usr/sbin/ip";
constexpr char kTc[] = "/usr/sbin/tc";
constexpr char kNetnsDir[] = "/run/netns";
constexpr char kPrefix[] = "gc";        // of every name made here (header)
constexpr char kMemberLink[] = "eth0";  // each member's veth, inside its namespace
constexpr char kBridgeLink[] = "br0";   // the bridge, inside the bridge namespace
constexpr int kMaxMembers = 250;
constexpr size_t kMaxMemberName = 32;
// The rule priority of the silent cuts: before the local table, which Build moves from 0 to
// kLocalTablePriority (else a packet to the namespace's own address never reaches the rule).
constexpr char kCutPriority[] = "10";
constexpr char kLocalTablePriority[] = "100";

// Runs argv to its end; InternalError naming the command and what it printed unless it exits 0.
absl::Status Run(const std::vector<std::string>& argv) {
  Subprocess command(argv, Subprocess::Stderr::kMergeIntoStdout);
  if (command.pid() < 0) {
    return absl::InternalError(absl::StrCat("cannot start `", absl::StrJoin(argv, " "), "`"));
  }
  const std::string output = command.ReadAll(std::chrono::seconds(30));
  const int code = command.Wait();
  if (code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("`", absl::StrJoin(argv, " "), "` exited with code ",
                                          code, ": ", absl::StripAsciiWhitespace(output)));
}

// `ip -n NS ARGS…` (NS empty: this process's namespace).
std::vector<std::string> Ip(const std::string& ns, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kIp};
  if (!ns.empty()) argv.insert(argv.end(), {"-n", ns});
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<std::string> Tc(const std::string& ns, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kTc, "-n", ns};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// Deletes the namespaces "gc<pid>-…" of processes that no longer run (their veths go with them).
void RemoveStaleNamespaces() {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(kNetnsDir, error)) {
    const std::string name = entry.path().filename();
    absl::string_view rest = name;
    int pid = 0;
    if (!absl::ConsumePrefix(&rest, kPrefix) || rest.find('-') == absl::string_view::npos ||
        !absl::SimpleAtoi(rest.substr(0, rest.find('-')), &pid) || pid <= 0) {
      continue;
    }
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    LOG(INFO) << "removing network namespace " << name << " of process " << pid
              << ", which no longer runs";
    if (absl::Status removed = Run(Ip("", {"netns", "del", name})); !removed.ok()) {
      LOG(WARNING) << removed;
    }
  }
}

// "10.x.y." for the `instance`-th object of this process: a /24 derived from the pid and the
// instance, skipping those this namespace already has an address in (another harness).
absl::StatusOr<std::string> ChooseSubnet(int instance) {
  Subprocess list({kIp, "-o", "-4", "addr", "show"});
  const std::string addresses = list.ReadAll(std::chrono::seconds(30));
  if (list.Wait() != 0) return absl::InternalError("`ip -o -4 addr show` failed");
  constexpr int kSubnets = 50 * 256;  // 10.200.0.0/24 to 10.249.255.0/24
  const int first = (static_cast<int>(::getpid()) * 7 + instance) % kSubnets;
  for (int i = 0; i < kSubnets; ++i) {
    const int n = (first + i) % kSubnets;
    const std::string subnet = absl::StrCat("10.", 200 + n / 256, ".", n % 256, ".");
    if (!absl::StrContains(addresses, " " + subnet)) return subnet;
  }
  return absl::ResourceExhaustedError("no free /24 in 10.200.0.0-10.249.255.255");
}

}  // namespace

absl::StatusOr<std::unique_ptr<NetworkNamespaces>> NetworkNamespaces::Create(
    const std::vector<std::string>& members) {
  if (::geteuid() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("network namespaces need root (this process runs as uid ", ::geteuid(), ")"));
  }
  if (members.empty() || members.size() > kMaxMembers) {
    return absl::InvalidArgumentError(
        absl::StrCat("network namespaces: ", members.size(), " members (1 to ", kMaxMembers, ")"));
  }
  std::set<std::string> seen;
  for (const std::string& m : members) {
    if (m.empty() || m.size() > kMaxMemberName ||
        m.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "network namespaces: member name '", m, "' is not 1-", kMaxMemberName, " of [a-z0-9-]"));
    }
    if (!seen.insert(m).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("network namespaces: member '", m, "' given twice"));
    }
  }
  RemoveStaleNamespaces();
  static std::atomic<int> instances{0};
  const int instance = instances++;
  ASSIGN_OR_RETURN(const std::string subnet, ChooseSubnet(instance));
  std::unique_ptr<NetworkNamespaces> made(
      new NetworkNamespaces(absl::StrCat(kPrefix, ::getpid(), "-", instance), subnet));
  RETURN_IF_ERROR(made->Build(members));  // The destructor removes what was made.
  return made;
}

NetworkNamespaces::NetworkNamespaces(std::string prefix, std::string subnet)
    : prefix_(std::move(prefix)), subnet_(std::move(subnet)) {}

absl::Status NetworkNamespaces::Build(const std::vector<std::string>& members) {
  const std::string br = bridge();
  RETURN_IF_ERROR(Run(Ip("", {"netns", "add", br})));
  namespaces_.push_back(br);
  RETURN_IF_ERROR(Run(Ip(br, {"link", "add", kBridgeLink, "type", "bridge"})));
  RETURN_IF_ERROR(Run(Ip(br, {"link", "set", kBridgeLink, "up"})));
  // The harness's veth: "gc<pid>-<k>" here, port "ph" on the bridge.
  harness_address_ = subnet_ + "254";
  RETURN_IF_ERROR(
      Run(Ip("", {"link", "add", prefix_, "type", "veth", "peer", "name", "ph", "netns", br})));
  harness_link_ = true;
  RETURN_IF_ERROR(Run(Ip(br, {"link", "set", "ph", "master", kBridgeLink, "up"})));
  RETURN_IF_ERROR(Run(Ip("", {"addr", "add", harness_address_ + "/24", "dev", prefix_})));
  RETURN_IF_ERROR(Run(Ip("", {"link", "set", prefix_, "up"})));
  for (size_t i = 0; i < members.size(); ++i) {
    const std::string& m = members[i];
    const std::string ns = Namespace(m);
    const std::string port = absl::StrCat("p", i + 1);
    RETURN_IF_ERROR(Run(Ip("", {"netns", "add", ns})));
    namespaces_.push_back(ns);
    addresses_[m] = absl::StrCat(subnet_, i + 1);
    ports_[m] = port;
    RETURN_IF_ERROR(Run(
        Ip(ns, {"link", "add", kMemberLink, "type", "veth", "peer", "name", port, "netns", br})));
    RETURN_IF_ERROR(Run(Ip(br, {"link", "set", port, "master", kBridgeLink, "up"})));
    RETURN_IF_ERROR(Run(Ip(ns, {"link", "set", "lo", "up"})));
    RETURN_IF_ERROR(Run(Ip(ns, {"addr", "add", addresses_[m] + "/24", "dev", kMemberLink})));
    RETURN_IF_ERROR(Run(Ip(ns, {"link", "set", kMemberLink, "up"})));
    RETURN_IF_ERROR(Run(Ip(ns, {"rule", "add", "pref", kLocalTablePriority, "table", "local"})));
    RETURN_IF_ERROR(Run(Ip(ns, {"rule", "del", "pref", "0", "table", "local"})));
  }
  return absl::OkStatus();
}

NetworkNamespaces::~NetworkNamespaces() {
  // Deleting a namespace deletes its end of every veth, and with it the other end — but later,
  // in the kernel's own time: the harness's veth, in this namespace, is deleted now.
  if (harness_link_) {
    if (absl::Status removed = Run(Ip("", {"link", "del", prefix_})); !removed.ok()) {
      LOG(WARNING) << removed;
    }
  }
  for (auto ns = namespaces_.rbegin(); ns != namespaces_.rend(); ++ns) {
    if (absl::Status removed = Run(Ip("", {"netns", "del", *ns})); !removed.ok()) {
      LOG(WARNING) << removed;
    }
  }
}

const std::string& NetworkNamespaces::address(const std::string& member) const {
  return addresses_.at(member);
}

std::string NetworkNamespaces::path(const std::string& member) const {
  CHECK(addresses_.count(member) == 1) << "no network namespace for " << member;
  return absl::StrCat(kNetnsDir, "/", Namespace(member));
}

absl::Status NetworkNamespaces::CheckMember(const std::string& member) const {
  if (addresses_.count(member) == 1) return absl::OkStatus();
  std::vector<std::string> known;
  for (const auto& [name, address] : addresses_) known.push_back(name);
  return absl::InvalidArgumentError(absl::StrCat("network namespaces: no member '", member,
                                                 "' (known: ", absl::StrJoin(known, ", "), ")"));
}

absl::Status NetworkNamespaces::Cut(const std::string& from, const std::string& to,
                                    Direction direction, Visibility visibility) {
  RETURN_IF_ERROR(CheckMember(from));
  RETURN_IF_ERROR(CheckMember(to));
  if (from == to) {
    return absl::InvalidArgumentError(
        absl::StrCat("network namespaces: cannot cut ", from, " from itself"));
  }
  std::vector<std::pair<std::string, std::string>> blocked = {{from, to}};
  if (direction == Direction::kBothWays) blocked.emplace_back(to, from);
  for (const auto& pair : blocked) {
    if (cut_.count(pair) == 1) {
      return absl::InvalidArgumentError(absl::StrCat("network namespaces: packets from ",
                                                     pair.first, " to ", pair.second,
                                                     " are already cut"));
    }
  }
  for (const auto& [sender, receiver] : blocked) {
    std::vector<std::string> cut;
    std::vector<std::string> heal;
    if (visibility == Visibility::kSilent) {
      // Dropped as they enter the receiver.
      const std::vector<std::string> rule = {"pref", kCutPriority, "from",     addresses_[sender],
                                             "iif",  kMemberLink,  "blackhole"};
      cut = Ip(Namespace(receiver), {"rule", "add"});
      heal = Ip(Namespace(receiver), {"rule", "del"});
      cut.insert(cut.end(), rule.begin(), rule.end());
      heal.insert(heal.end(), rule.begin(), rule.end());
    } else {
      // Refused as the sender sends them.
      const std::string route = addresses_[receiver] + "/32";
      cut = Ip(Namespace(sender), {"route", "add", "unreachable", route});
      heal = Ip(Namespace(sender), {"route", "del", "unreachable", route});
    }
    RETURN_IF_ERROR(Run(cut));
    undo_.push_back(std::move(heal));
    cut_.emplace(sender, receiver);
  }
  return absl::OkStatus();
}

absl::Status NetworkNamespaces::Limit(const std::string& member, int64_t kbit_per_second) {
  RETURN_IF_ERROR(CheckMember(member));
  if (kbit_per_second < 8) {
    return absl::InvalidArgumentError(absl::StrCat("network namespaces: a limit of ",
                                                   kbit_per_second, " kbit/s (at least 8 kbit/s)"));
  }
  // The bucket: 32 KiB, or what the rate sends in 4 ms (a timer tick at HZ=250) if more.
  const int64_t burst_bytes = std::max<int64_t>(32 * 1024, kbit_per_second * 1000 / 8 * 4 / 1000);
  const std::vector<std::string> tbf = {"root",  "tbf",
                                        "rate",  absl::StrCat(kbit_per_second, "kbit"),
                                        "burst", absl::StrCat(burst_bytes, "b"),
                                        "latency", "100ms"};
  // Egress at the member's own veth, ingress at its port on the bridge (the bridge's egress).
  const std::vector<std::pair<std::string, std::string>> links = {{Namespace(member), kMemberLink},
                                                                  {bridge(), ports_[member]}};
  for (const auto& [ns, link] : links) {
    std::vector<std::string> limit = Tc(ns, {"qdisc", "replace", "dev", link});
    limit.insert(limit.end(), tbf.begin(), tbf.end());
    RETURN_IF_ERROR(Run(limit));
    if (limited_.count(member) == 0) undo_.push_back(Tc(ns, {"qdisc", "del", "dev", link, "root"}));
  }
  limited_.insert(member);
  return absl::OkStatus();
}

absl::Status NetworkNamespaces::HealAll() {
  absl::Status first;
  for (auto undo = undo_.rbegin(); undo != undo_.rend(); ++undo) first.Update(Run(*undo));
  undo_.clear();
  cut_.clear();
  limited_.clear();
  return first;
}

}  // namespace granary
