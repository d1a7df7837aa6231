// The chaos harness (DESIGN.md §6, `granary chaos`): runs one scenario of chaos_plan.h against a
// real dispatcher, workers and client (`granary run`) as processes on 127.0.0.1, injects its
// faults (SIGKILL and restart at the planned moments, failpoints armed in one process, and the
// proxy scenarios' toxics on the links' TcpProxies),
// restarts any process that crashed at a failpoint, waits for the client to finish, and
// compares each epoch's digest with the in-process reference (`granary local`): the same rows,
// the same multiset digest — every element exactly once. With more than one consumer in equal
// shares (the default), each epoch also fails unless every consumer handed out as many elements
// (`steps`; not under remainder uneven), none dropped under pad and none padded under drop.
//
// The replicated scenarios (a fault that strikes "the leader") also fail when no other replica
// leads within 30 s of the fault, or when a replica started again or healed does not rejoin as
// a follower within 60 s; the run waits for those checks even when the client finished first.
// Every run measures how long the trainer stalled: the longest time its position did not
// advance, before the first fault and after it.
#ifndef GRANARY_FAULTINJECT_CHAOS_HARNESS_H_
#define GRANARY_FAULTINJECT_CHAOS_HARNESS_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "pipeline/digests/digest_file.h"

namespace granary {

struct ChaosOptions {
  std::string binary;  // The granary binary to start the processes from.
  std::string scenario = "nofail";
  uint64_t seed = 0;
  int workers = 2;
  int64_t epochs = 3;
  // The run's files (journal, cache, checkpoints, logs, digests); created if missing.
  std::string dir;
  // The dataset: `images` 32x32 JPEGs in 8 TFRecord files, generated here if missing.
  std::string data_dir;
  int64_t images = 512;
  // The client's simulated training step per batch of 8 (paces an epoch to ~images/8 * step).
  int step_ms = 10;
  // Overrides the scenario's cache policy ("compute", "full", "at_mark"); empty: the scenario's.
  std::string cache_policy;
  // GRANARY_FAILPOINTS for the first start of one process ("dispatcher", "worker-N", "workers",
  // "client").
  std::string failpoint_process;
  std::string failpoints;
  // Arms worker.after_resume_before_serve=error in every start of every worker: a broken build
  // (it drops an element) the harness must catch.
  bool testonly_break_workers = false;
  // How the client reads the workers' elements: "tcp", or "shm" (shared memory, every element
  // by segment: the workers run with --local_transport=shm --shm_min_bytes=0).
  std::string transport = "tcp";
  // Hostile and misbehaving clients alongside the run (hostile_traffic.h), whatever the
  // scenario; the scenario `hostile` always has them. Not with the replicated dispatcher.
  bool hostile = false;
  // Consumers of the job, each a client process ("client-<i>" when more than one): each
  // writes its own digests, and their union must be the reference's, exactly once. A fault
  // striking "client" strikes every consumer. The scenario equal_shares draws them (leave 1).
  int consumers = 1;
  // With more than one consumer: the remainder rule of their equal shares ("pad", "drop",
  // "uneven"), overriding the scenario's (equal_shares draws it); empty: the scenario's.
  std::string remainder;
  // The cache tier of the Put/Get policies: "files" (<dir>/cache) or "redis" (a redis-server on
  // loopback the run starts).
  std::string cache_tier = "files";
  int64_t timeout_seconds = 180;
};

struct ChaosReport {
  bool passed = false;
  int64_t faults_planned = 0;
  int64_t faults_injected = 0;
  int64_t failpoint_firings = 0;  // "granary failpoint … fired" lines in the processes' logs.
  int64_t epochs_verified = 0;
  int64_t rows_verified = 0;
  double seconds = 0;
  // The longest time the client's position did not advance before the first fault and from it
  // on (-1 without faults).
  double longest_stall_before_faults_seconds = 0;
  double longest_stall_after_faults_seconds = -1;
  // Of a fault that struck the leader: from the fault until another replica led alone (-1
  // without such a fault).
  double new_leader_seconds = -1;
  // Hostile traffic alongside the run: requests sent, and those answered wrongly (a violation
  // fails the run).
  int64_t hostile_requests = 0;
  int64_t hostile_violations = 0;
};

// Runs the scenario, printing its progress, one verdict line per epoch and a final line
// starting with PASS or FAIL (with the command that reproduces the run) to `out`.
ChaosReport RunChaos(const ChaosOptions& options, std::FILE* out);

// The equal-shares verdict of one epoch, from its consumers' digest lines in consumer order.
struct EqualSharesVerdict {
  // For the epoch's verdict line: "; steps 22 = 22, padding 1 + 0, remainder dropped 0 + 0"
  // (steps joined by " / " when they differ).
  std::string line;
  // Why the rule `remainder` ("pad", "drop", "uneven") is broken: the consumers' steps differ
  // (allowed under uneven), a consumer dropped under pad or padded under drop. Empty: kept.
  std::string wrong;
};
EqualSharesVerdict CheckEqualShares(const std::vector<DigestLine>& lines,
                                    const std::string& remainder);

// The `granary chaos` command line that runs `options` again.
std::string ChaosCommandLine(const ChaosOptions& options);

}  // namespace granary

#endif  // GRANARY_FAULTINJECT_CHAOS_HARNESS_H_
