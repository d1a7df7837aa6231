// Consumer shares (DESIGN.md §6, "Consumers and shares"): how an epoch's split plan is divided
// among the job's consumers, and what each consumer learns of the others so that all of them
// deliver the same number of elements.
//
// The plan is the epoch's global order: its splits enumerated and permuted by (seed, epoch),
// whatever the number of consumers. Under SHARDING_DYNAMIC every task leases the plan's next
// split. Under SHARDING_EQUAL the plan is dealt once, when the epoch starts, into one share per
// consumer (DealShares), and a consumer's tasks lease only from its share — work moves between
// the tasks of one consumer, never between consumers. Splits of unequal sizes, filters and
// partial batches still leave consumers with different element counts; the consumers' gates
// (client/equal_share_gate.h) equalize them by the job's Remainder rule, from the lower bounds
// OthersOf reports.
//
// Pure functions of their arguments; thread-compatible.
#ifndef GRANARY_DISPATCHER_CONSUMER_SHARES_H_
#define GRANARY_DISPATCHER_CONSUMER_SHARES_H_

#include <cstdint>
#include <vector>

#include "google/protobuf/repeated_ptr_field.h"
#include "proto/dispatcher.pb.h"
#include "proto/dispatcher_state.pb.h"
#include "proto/pipeline.pb.h"

namespace granary {

// The sharding epochs of a job with `options` use: SHARDING_AUTO is SHARDING_EQUAL for more
// than one consumer, else SHARDING_DYNAMIC.
Sharding EffectiveSharding(const JobOptions& options);

// Deals the plan's indices into `consumers` shares (REQUIRES: consumers >= 1): in plan order,
// each split goes to the share that weighs least so far (ties: the lowest consumer). A split
// weighs its record count when known (Split.num_records, or its cache chunk's), else 1 — so
// alike splits are dealt round robin. Deterministic in (plan, consumers).
std::vector<ConsumerShare> DealShares(const google::protobuf::RepeatedPtrField<Split>& plan,
                                      int32_t consumers);

// Elastic resume: the shares of `consumers` new consumers of `epoch` (REQUIRES: consumers >=
// 1, leased.size() == consumers): consumer c's starts with leased[c] (plan indices leased
// already, to the tasks it takes over), marked leased; then the splits no task holds yet are
// dealt as DealShares deals a plan.
std::vector<ConsumerShare> RedealShares(const EpochState& epoch,
                                        const std::vector<std::vector<int64_t>>& leased,
                                        int32_t consumers);

// Whether `consumer` has splits left to lease in `epoch`: in its share for an equal-shares
// epoch, in the plan otherwise. False once the epoch has finished.
bool HandsOutSplitsTo(const EpochState& epoch, int32_t consumer);

// The plan indices a lease of up to `max` splits for a task of `consumer` takes next, in order
// (empty when it has none left).
std::vector<int64_t> NextPlanIndices(const EpochState& epoch, int32_t consumer, int64_t max);

// Records that `count` splits were leased to a task of `consumer` (REQUIRES: they were the
// ones NextPlanIndices answered).
void MarkLeased(EpochState& epoch, int32_t consumer, int64_t count);

// The plan indices leased so far, ascending.
std::vector<int64_t> LeasedPlanIndices(const EpochState& epoch);

// What is known of one consumer's element count in an epoch.
struct ConsumerCount {
  // Its tasks have at least this many elements together.
  int64_t at_least = 0;
  // The count is exact: its share is leased and its tasks have finished.
  bool final = false;
};

// What consumer `self` of `counts.size()` consumers learns of the others (REQUIRES: self is
// one of them).
OtherShares OthersOf(int32_t self, const std::vector<ConsumerCount>& counts, Remainder remainder);

}  // namespace granary

#endif  // GRANARY_DISPATCHER_CONSUMER_SHARES_H_
