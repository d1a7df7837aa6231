// NetworkNamespaces: real kernel networking for one chaos run (issue 33). Each member (a process
// of the run: "dispatcher", "worker-0", "client", …) gets a network namespace of its own with a
// veth "eth0" into a bridge namespace and an address in a /24 of 10.200.0.0-10.249.255.255
// chosen for this object; the process that owns it (the harness) gets a veth of its own from
// its namespace into the bridge, at .254 of the same /24, which no cut ever touches (its
// status and scaling RPCs). There is no default route anywhere: nothing leaves the machine.
//
// Faults, all healed by Heal/HealAll and removed with everything else by the destructor:
//   Cut(from, to, kOneWay, kSilent)    packets from `from` are dropped as they enter `to`
//                                      (`ip rule … iif eth0 blackhole` in `to`'s namespace):
//                                      neither side notices, connections time out
//   Cut(from, to, kOneWay, kRefused)   `from` has an unreachable route to `to`: its connects
//                                      and sends fail at once (EHOSTUNREACH); `to` notices nothing
//   kBothWays                          the same in both directions
//   Limit(member, kbit)                a token bucket (tc tbf) on the member's egress (its eth0)
//                                      and ingress (its bridge port), each `kbit` kbit/s, with a
//                                      bucket of 32 KiB or 4 ms of the rate, whichever is larger
//                                      (a smaller one than a timer tick's worth of bytes would
//                                      hold a 10 Gbit/s link far below its rate)
// Since TCP needs both directions, every cut blocks a TCP connection; they differ in which side
// notices and how (ISSUE33-PLAN §1).
//
// Names: namespaces "gc<pid>-<k>-bridge" and "gc<pid>-<k>-<member>", the harness's veth
// "gc<pid>-<k>" (15 characters at most), where <pid> is this process and <k> counts the objects
// it made. Create first removes the namespaces of a process that no longer runs (a SIGKILLed
// harness). Everything is done with `ip` and `tc` (iproute2) run as subprocesses; their errors
// name the command and what it printed. Needs root. Thread-compatible.
#ifndef GRANARY_FAULTINJECT_NETNS_H_
#define GRANARY_FAULTINJECT_NETNS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace granary {

class NetworkNamespaces {
 public:
  enum class Direction { kOneWay, kBothWays };
  enum class Visibility { kSilent, kRefused };

  // Creates the bridge, a namespace per member and the harness's veth. FailedPrecondition
  // (saying it needs root) unless this process runs as root; InvalidArgument for no members,
  // more than 250, a repeated member or a name not of [a-z0-9-] (at most 32 characters); the
  // failing command's error otherwise (what was made is removed again).
  static absl::StatusOr<std::unique_ptr<NetworkNamespaces>> Create(
      const std::vector<std::string>& members);
  // Removes every namespace (with their veths, routes, rules and qdiscs).
  ~NetworkNamespaces();
  NetworkNamespaces(const NetworkNamespaces&) = delete;
  NetworkNamespaces& operator=(const NetworkNamespaces&) = delete;

  // The member's address ("10.x.y.n") and its namespace's path (/run/netns/…, for
  // Subprocess). REQUIRES: `member` is one of Create's.
  const std::string& address(const std::string& member) const;
  std::string path(const std::string& member) const;
  // The harness's own address in the bridge's /24.
  const std::string& harness_address() const { return harness_address_; }
  // The harness's veth, in this process's namespace: every byte between the harness and the
  // members crosses it (its counters are /sys/class/net/<link>/statistics/{rx,tx}_bytes).
  const std::string& harness_link() const { return prefix_; }

  // Cuts `from` from `to` (above). InvalidArgument for an unknown member, the same member twice,
  // or a cut of this pair and direction already in place; the command's error otherwise.
  absl::Status Cut(const std::string& from, const std::string& to, Direction direction,
                   Visibility visibility);
  // Limits `member`'s link to `kbit_per_second` each way (replacing an earlier limit).
  // InvalidArgument for an unknown member or a rate below 8 kbit/s.
  absl::Status Limit(const std::string& member, int64_t kbit_per_second);
  // Undoes every cut and limit in place (the first error, after trying every undo).
  absl::Status HealAll();

 private:
  NetworkNamespaces(std::string prefix, std::string subnet);
  // Builds the namespaces (Create's work after the checks).
  absl::Status Build(const std::vector<std::string>& members);
  absl::Status CheckMember(const std::string& member) const;
  std::string bridge() const { return prefix_ + "-bridge"; }
  std::string Namespace(const std::string& member) const { return prefix_ + "-" + member; }

  const std::string prefix_;  // "gc<pid>-<k>": the harness's veth, and the namespaces' prefix
  const std::string subnet_;  // "10.x.y."
  std::string harness_address_;
  bool harness_link_ = false;  // whether the harness's veth was made
  // Each member's address and bridge port ("p<n>"), in Create's order.
  std::map<std::string, std::string> addresses_;
  std::map<std::string, std::string> ports_;
  std::vector<std::string> namespaces_;  // made so far, the bridge first
  // The commands that undo each fault in place, in the order they must run.
  std::vector<std::vector<std::string>> undo_;
  // The cuts in place, as (from, to) per blocked direction, and the limited members.
  std::set<std::pair<std::string, std::string>> cut_;
  std::set<std::string> limited_;
};

}  // namespace granary

#endif  // GRANARY_FAULTINJECT_NETNS_H_
