// The faults of one `granary chaos` run (DESIGN.md §6): a pure function of the scenario, the
// seed, the cluster's shape and the epoch's size, so that a run is reproduced from its seed.
//
// Faults are timed causally, never by sleeps: a fault fires once the client has delivered a
// number of rows of an epoch (read from its position file) and, optionally, once a worker has
// written a number of checkpoints since it started (read from its status RPC; waived a quarter
// into the run's last epoch, so that a run ending first cannot skip the fault) — or, for a
// fault "during recovery", as soon as the previous fault's restarted processes are serving
// again. The scenarios:
//   nofail      no faults
//   recover     one worker SIGKILLed after its k-th checkpoint, restarted at the same address
//   failover    one worker SIGKILLed for good after its k-th checkpoint; a standby takes over
//   killall     the dispatcher and all workers SIGKILLed, restarted from journal and checkpoints
//   dispatcher  the dispatcher alone SIGKILLed mid-epoch and restarted
//   putfail     all workers SIGKILLed mid cache-writing (Put) epoch 0; the Get epochs must match
//   getfail     all workers SIGKILLed mid cache-reading (Get) epoch, restarted
//   scale       the job scaled mid-epoch (issue 17): shrunk to 1 task, grown onto every worker
//               and a standby, a worker SIGKILLed while the joined tasks run, then scaled again
//               and the dispatcher SIGKILLed right after the step
//   random      1-4 faults, each SIGKILLing a random non-empty subset of dispatcher, workers and
//               client — or scaling the job — several in one epoch at times, some right after
//               the previous fault's restart or scaling step (a fault during recovery), under a
//               random cache policy
//   hostile     random's faults while hostile and misbehaving clients run alongside
//               (hostile_traffic.h: requests the servers must refuse, jobs opened and abandoned);
//               any scenario can have them too (--hostile)
//   equal_shares  2-3 consumers (client-<i>) with equal shares (issue 34), the remainder pad,
//                 drop or uneven, under random's faults (a fault may strike one consumer alone)
//                 and one consumer SIGKILLed late in an epoch — while it pads or drops — and
//                 restarted from its position file
// The replicated scenarios run the replicated dispatcher instead (issue 32): a local etcd of 3
// members and 3 replicas "replica-<i>", each reaching each member through its own TcpProxy;
// workers and client are given every replica's address. "The leader" is whichever replica leads
// when the fault strikes — asked, never assumed:
//   leader_failover   the leader SIGKILLed mid-epoch (not in the last epoch); once another
//                     replica leads it is started again (a follower now) after a delay, or left
//                     dead
//   leader_partition  the leader cut from every etcd member (not from workers and client) mid-
//                     epoch (not in the last); once another replica leads, the cut heals after a
//                     delay and the old leader must rejoin as a follower
// The network scenarios (issue 33) run every process in a network namespace of its own
// (faultinject/netns.h; they need root and fail at once without it). Each disrupts the network
// mid-epoch (not in the last epoch) and heals it all after a drawn delay:
//   partition_worker      a worker cut from the dispatcher both ways, silently (packets
//                         dropped), for longer than the dispatcher's worker timeout (1 s) — the
//                         dispatcher reassigns its splits while it may still deliver to its
//                         trainer, which still reaches it
//   partition_client      the client cut from one worker both ways, silently or refused at once
//   partition_oneway      the packets of one direction between two processes (worker and
//                         dispatcher, client and worker, or client and dispatcher) dropped
//   partition_dispatcher  the dispatcher cut from every worker and the client both ways,
//                         silently or refused at once
//   bandwidth             one process's link limited to 2-20 mbit/s each way
// The disk scenarios (issue 33) make one process's files fail or stall mid-epoch, then heal them
// after a delay (a second fault, after_previous); the target is the dispatcher's journal, or a
// worker's checkpoints or cache chunks (then under a Put/Get cache policy, in the epoch that
// writes or reads them). Servers must stay up, work must resume after the heal:
//   disk_full   the target's directory, a 64 MiB tmpfs, filled up for real (needs root)
//   disk_eio    EIO on the target's writes, syncs (journal) or reads; a checkpoint read fault
//               restarts the worker while it lasts (only a starting task reads checkpoints);
//               the journal's heal restarts the dispatcher (a failed journal write stops it
//               changing state until restarted)
//   disk_stall  the target's fsyncs stall 1-5 s each
// The power-loss scenarios (issue 33) run every server with a sync ledger
// (common/sync_ledger.h); a power loss SIGKILLs its victims, drops every write each made since
// its last fsync (truncates files to their synced length, reverts in-place writes, deletes files
// and undoes renames whose directory was never synced), then restarts them:
//   powerloss      the dispatcher or one worker (the seed picks) loses power mid-epoch, after
//                  a worker's k-th checkpoint, under a random cache policy; torn (half the
//                  seeds): a seeded random part of each file's unsynced tail survives instead,
//                  its last block sometimes garbled
//   powerloss_all  the dispatcher and every worker lose power at once (like killall), torn in
//                  half the seeds
// In 30% of the seeds of either, the same servers lose power again as soon as they serve again
// (during recovery), dropping what the recovery wrote unsynced too.
// The proxy scenarios (issue 33) put a TcpProxy (tcp_proxy.h) on every link of the run — the
// client's and each worker's to the dispatcher ("client>dispatcher", "worker-<i>>dispatcher")
// and the client's to each worker ("client>worker-<i>", the address the worker advertises) —
// and poison the bytes of some links mid-epoch, healing them after a seeded delay. They need no
// root. A process on a poisoned link stays up; the bytes it loses are an RPC's failure:
//   proxy_latency    latency (+ jitter, seeded), and at times a delayed FIN, on a seeded set of
//                    links, each direction drawn on its own, for 1-4 s
//   proxy_reset      every open connection of one link reset (RST), 1-3 times, 0.2-1.5 s apart
//   proxy_halfopen   one link half-open (one direction or both forward nothing, silently; or the
//                    timeout toxic: nothing forwarded, new connections held) for longer than the
//                    dispatcher's worker timeout (1 s), with a standby worker
//   proxy_truncate   each connection of one link closed after N bytes (50-3000) of one direction
//                    since the fault — a message cut in the middle — for 0.5-3 s
//   proxy_bandwidth  one link slowed to 50-500 kB/s, one direction or both, for 1-4 s
// The clock scenarios (issue 33, fault class 4) run every process with its wall clock
// (CLOCK_REALTIME) read through libfaketime (Debian's faketime package), its steady clock
// untouched — as an NTP step moves a real machine's. Only backward steps are drawn: under
// libfaketime a forward step stretches every Abseil timed wait of the process by the step (its
// futex deadline is on the kernel's true wall clock), a stall no real step causes:
//   clock_step        the wall clock of the dispatcher, a worker or the client steps back 1-10
//                     minutes mid-epoch, and forward again (healed) 1-4 s later
//   leader_clock_step (replicated) the leader is cut from every etcd member mid-epoch (not in
//                     the last), and its wall clock steps back 1-10 minutes right after; it must
//                     still stop leading when its lease runs out. Once another replica leads,
//                     the cut heals, then the clock
//   clock_skew        the Env clock (steady; every Granary timer's) of the dispatcher or a worker
//                     runs at 0.5x-2x mid-epoch — half the time after jumping 1-10 minutes
//                     forward — for 2-5 s, then at 1x again (the jump stays: a steady clock
//                     never goes back). The client's clock is not skewed
// Where a scenario leaves a choice (which worker, which epoch, at what row, how long), the seed
// decides.
#ifndef GRANARY_FAULTINJECT_CHAOS_PLAN_H_
#define GRANARY_FAULTINJECT_CHAOS_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/disk_fault_control.h"
#include "faultinject/skewed_clock_env.h"
#include "faultinject/tcp_proxy.h"
#include "proto/cache.pb.h"

namespace granary {

// Processes are named "dispatcher" (or "replica-<i>" in the replicated scenarios), "worker-<i>"
// (standbys numbered after the workers) and "client".
inline constexpr char kLeader[] = "leader";

// A network fault of the network scenarios (every process in a network namespace of its own).
struct NetworkFault {
  enum class Kind { kCut, kLimit, kHeal };
  Kind kind = Kind::kCut;
  // kCut: the packets from `from` to each of `to` (and back, unless `one_way`) dropped silently
  // (`silent`: connections time out) or refused at once (an unreachable route in the sender).
  // kLimit: `from`'s link limited to `kbit_per_second` each way.
  // kHeal: every cut and limit in place undone.
  std::string from;
  std::vector<std::string> to;
  bool one_way = false;
  bool silent = true;
  int64_t kbit_per_second = 0;
};

// A failing, full or slow disk (the disk scenarios), or its heal.
struct ChaosDiskFault {
  enum class Kind { kFull, kEio, kStall, kHeal };
  Kind kind = Kind::kEio;
  // Whose files: "journal" (the dispatcher's), "checkpoints" or "cache" (the workers').
  std::string target;
  // kEio and kStall: the process whose operations fail or stall, and which operations.
  std::string process;
  DiskOp op = DiskOp::kWrite;
  int64_t stall_ms = 0;  // kStall.
};

// A power loss of the fault's victims (instead of a plain SIGKILL): their unsynced writes are
// dropped before they restart.
struct PowerLossFault {
  // Torn writes, drawn from `torn_seed`: part of each file's unsynced tail survives (common/
  // durability_model.h). false: every unsynced byte is dropped.
  bool torn = false;
  uint64_t torn_seed = 0;
};

// The proxy scenarios' fault: the toxics of some links' proxies replaced (the default toxics, none:
// a heal), or their open connections reset.
struct ProxyFault {
  // "client>dispatcher", "worker-<i>>dispatcher", "client>worker-<i>".
  std::vector<std::string> links;
  // Toward the server the link leads to (the dispatcher, the worker), and back.
  ProxyToxics to_server;
  ProxyToxics to_client;
  // The timeout toxic (TcpProxy::SetTimeout).
  bool timeout = false;
  // Instead of the above: reset every open connection of the links (their toxics unchanged).
  bool reset = false;

  // E.g. "reset every connection of client>worker-1", "heal worker-0>dispatcher".
  std::string Describe() const;
};

// A clock fault of one process (the clock scenarios). Without `skew`: from now on it reads its
// wall clock (CLOCK_REALTIME, through libfaketime) `wall_offset_seconds` off the true time (0:
// the step is healed); its steady clock does not move. With `skew`: its Env clock (steady, the
// clock of every Granary timer: faultinject/skewed_clock_env.h) runs at skew->rate from now on,
// having jumped forward skew->jump_seconds in all (rate 1: healed; a jump is never undone).
struct ClockFault {
  std::string process;  // or kLeader: the replica the last leader fault struck
  int64_t wall_offset_seconds = 0;
  std::optional<ClockSkew> skew;
};

struct ChaosFault {
  // When: the client reads epoch `epoch` (or a later one) and has delivered `rows` rows of it…
  int64_t epoch = 0;
  int64_t rows = 0;
  // …and `checkpointer` (if not empty) has written `checkpoints` checkpoints since it started
  // (or the client is a quarter into the last epoch).
  std::string checkpointer;
  int64_t checkpoints = 0;
  // Instead of the above: as soon as the previous fault's restarted processes serve again.
  bool during_recovery = false;
  // Instead of the above: once a replica other than the one the last leader fault struck leads,
  // and `after_ms` after the previous fault.
  bool after_new_leader = false;
  // Instead of the above: `after_ms` after the previous fault (e.g. the heal of a disruption
  // the previous fault began).
  bool after_previous = false;
  int64_t after_ms = 0;

  // What: SIGKILL these, then (unless `for_good`) start them again with the same identity and
  // address. kLeader: the replica leading when the fault strikes.
  std::vector<std::string> victims;
  bool for_good = false;
  // Or: start again these processes, killed for good by an earlier fault (kLeader: the replica
  // the last leader fault struck), with the same identity and address.
  std::vector<std::string> revive;
  // Or: cut the leading replica from every etcd member (its workers and client still reach it)…
  bool cut_leader = false;
  // …or heal that cut (the old leader must then rejoin as a follower).
  bool heal_cut = false;
  // Or, when > 0: scale the job to this many tasks per consumer (ScaleJob) — tasks join its
  // running epoch or are shed (issue 17).
  int32_t scale_to = 0;
  // Or: disrupt or heal the network.
  std::optional<NetworkFault> network;
  // Or: a disk fault, or its heal (then SIGKILL and restart `victims`, if any).
  std::optional<ChaosDiskFault> disk;
  // With a value: the victims lose power instead of only being SIGKILLed.
  std::optional<PowerLossFault> power_loss;
  // Or: poison or heal links of the proxy scenarios.
  std::optional<ProxyFault> proxy;
  // Or: step a process's wall clock, or skew its Env clock.
  std::optional<ClockFault> clock;

  // One line, e.g. "epoch 1 row 240, after worker-0's 2nd checkpoint: kill worker-0, restart".
  std::string Describe() const;
};

struct ChaosPlan {
  std::string scenario;
  uint64_t seed = 0;
  int workers = 2;
  int standby = 0;
  // 0: one dispatcher journaling to RocksDB; else this many dispatcher replicas over a local
  // etcd of 3 members (the replicated scenarios).
  int replicas = 0;
  int64_t epochs = 3;
  CachePolicy cache_policy = CACHE_COMPUTE;
  // Hostile and misbehaving clients alongside the run (hostile_traffic.h).
  bool hostile_traffic = false;
  std::vector<ChaosFault> faults;
  // A TcpProxy on every link (the proxy scenarios).
  bool proxies = false;
  // Consumers of the job: equal_shares draws 2-3; 0: the run's (`granary chaos --consumers`).
  int consumers = 0;
  // How an epoch is divided among more than one consumer, and the rule that makes their counts
  // equal (`granary run --sharding`, `--remainder`).
  std::string sharding = "auto";
  std::string remainder = "pad";
};

// The scenarios, in the order of the list above.
const std::vector<std::string>& ChaosScenarios();

// InvalidArgument naming `scenario` and the known ones unless it is one of ChaosScenarios().
absl::Status CheckChaosScenario(const std::string& scenario);

// Whether `scenario` runs the replicated dispatcher (and needs Debian's etcd binary).
bool IsReplicatedScenario(const std::string& scenario);

// Whether `scenario` runs every process in a network namespace of its own (and needs root).
bool IsNetworkScenario(const std::string& scenario);
// Whether `scenario` is one of the disk scenarios (which need 2 epochs: a cache target's Put
// epoch, then Get).
bool IsDiskScenario(const std::string& scenario);
// Whether `scenario` steps wall clocks (and needs Debian's libfaketime), or skews Env clocks.
bool StepsWallClocks(const std::string& scenario);
bool SkewsEnvClocks(const std::string& scenario);

// InvalidArgument for an unknown scenario (naming the known ones) or a shape the scenario cannot
// run: putfail, getfail and the disk scenarios need 2 epochs, every scenario at least 1 worker.
absl::StatusOr<ChaosPlan> MakeChaosPlan(const std::string& scenario, uint64_t seed, int workers,
                                        int64_t epochs, int64_t rows_per_epoch);

}  // namespace granary

#endif  // GRANARY_FAULTINJECT_CHAOS_PLAN_H_
