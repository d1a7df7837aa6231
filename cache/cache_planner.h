// CachePlanner: where a cache_policy auto job caches (Cachew's autocaching, DESIGN.md §5), and
// which caches make room for a new one. Pure functions of their inputs: the same profile and
// cache table give the same decision, which the dispatcher journals (DecideCacheUpdate).
//
// The model. A worker measures the pipeline on a sample (cache/cache_profiler.h); per sample,
//   C   = the source and every op (the whole pipeline: what a computing epoch pays),
//   W_k = writing the sample's elements at candidate point k as a chunk (the Put's extra),
//   G_k = reading them back + every op after k (what a Get epoch pays: the ops after the mark
//         still run — Cachew's own model leaves them out).
// Over the E epochs the job has left (kUnboundedEpochs when num_epochs is 0), the expected time
// of each choice is
//   compute:              E·C
//   Put at k (new):       (C + W_k) + (E − 1)·G_k   (the first epoch writes, the others read)
//   Get at k (existing):  E·G_k                     (another job with the same prefix wrote it)
// and the cheapest wins, provided it saves at least `min_gain` of compute's time (a cache costs
// storage); ties go to the earlier point. A Put whose estimated size — the sample's bytes at k
// scaled by estimated_records / sample_records — exceeds the space `room_bytes` says can be
// made is no choice.
#ifndef GRANARY_CACHE_CACHE_PLANNER_H_
#define GRANARY_CACHE_CACHE_PLANNER_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/cache.pb.h"

namespace granary {

// The horizon assumed for a job without num_epochs.
inline constexpr int64_t kUnboundedEpochs = 100;

struct CachePlanInput {
  CacheProfile profile;
  // Epochs the decision covers (the job's remaining ones); 0: unbounded.
  int64_t epochs = 0;
  // Candidate points whose cache is already complete and valid (a Get needs no Put).
  std::set<int> existing_points;
  // The most bytes a new cache may take (the capacity, less what cannot be evicted); nullopt:
  // unlimited.
  std::optional<int64_t> room_bytes;
};

struct CachePlanOptions {
  // A cache must save this fraction of compute's expected time to be chosen.
  double min_gain = 0.02;
};

// OK when `profile` measures exactly `candidates` (ascending mark points), with a positive
// sample and finite, non-negative times and sizes; InvalidArgument naming the first fault.
absl::Status CheckCacheProfile(const CacheProfile& profile, const std::vector<int>& candidates);

// The decision for a checked profile (CheckCacheProfile). Its reason states the expected time of
// every choice, per epoch of the sample's size.
CacheDecision PlanCache(const CachePlanInput& input, const CachePlanOptions& options = {});

// The estimated bytes of the whole epoch's cache at `point` (0 for a point the profile lacks).
int64_t EstimatedCacheBytes(const CacheProfile& profile, int point);

// A cache as eviction sees it.
struct CacheUsage {
  std::string cache_key;
  int64_t bytes = 0;
  // CacheState.last_used_seq: smaller is less recently used.
  uint64_t last_used_seq = 0;
  // An epoch that is not finished writes or reads it: never evicted.
  bool in_use = false;
};

// The caches to evict so that `incoming` more bytes fit in `capacity`: caches not in use, least
// recently used first, until it fits (none if it fits already). nullopt when even evicting all
// of them would not make room.
std::optional<std::vector<std::string>> EvictionsToFit(std::vector<CacheUsage> caches,
                                                       int64_t incoming, int64_t capacity);

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_PLANNER_H_
