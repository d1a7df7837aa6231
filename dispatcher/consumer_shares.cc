#include "dispatcher/consumer_shares.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace granary {
namespace {

int64_t Weight(const Split& split) {
  if (split.has_cache_chunk()) return std::max<int64_t>(split.cache_chunk().num_elements(), 1);
  return split.num_records() >= 0 ? std::max<int64_t>(split.num_records(), 1) : 1;
}

bool IsEqual(const EpochState& epoch) { return epoch.shares_size() > 0; }

// Appends `indices` of `plan` to `shares`, each to the one that weighs least so far.
void Deal(const google::protobuf::RepeatedPtrField<Split>& plan,
          const std::vector<int64_t>& indices, std::vector<ConsumerShare>& shares) {
  std::vector<int64_t> weights(shares.size(), 0);
  for (int64_t i : indices) {
    const auto lightest = std::min_element(weights.begin(), weights.end()) - weights.begin();
    shares[lightest].add_plan_index(i);
    weights[lightest] += Weight(plan[i]);
  }
}

}  // namespace

Sharding EffectiveSharding(const JobOptions& options) {
  if (options.sharding() != SHARDING_AUTO) return options.sharding();
  return options.num_consumers() > 1 ? SHARDING_EQUAL : SHARDING_DYNAMIC;
}

std::vector<ConsumerShare> DealShares(const google::protobuf::RepeatedPtrField<Split>& plan,
                                      int32_t consumers) {
  std::vector<ConsumerShare> shares(consumers);
  std::vector<int64_t> all(plan.size());
  for (int i = 0; i < plan.size(); ++i) all[i] = i;
  Deal(plan, all, shares);
  return shares;
}

std::vector<ConsumerShare> RedealShares(const EpochState& epoch,
                                        const std::vector<std::vector<int64_t>>& leased,
                                        int32_t consumers) {
  std::vector<ConsumerShare> shares(consumers);
  for (int32_t c = 0; c < consumers; ++c) {
    for (int64_t i : leased[c]) shares[c].add_plan_index(i);
    shares[c].set_leased(static_cast<int64_t>(leased[c].size()));
  }
  const std::vector<int64_t> taken = LeasedPlanIndices(epoch);
  std::vector<int64_t> unleased;
  for (int64_t i = 0, t = 0; i < epoch.plan_size(); ++i) {
    while (t < static_cast<int64_t>(taken.size()) && taken[t] < i) ++t;
    if (t == static_cast<int64_t>(taken.size()) || taken[t] != i) unleased.push_back(i);
  }
  Deal(epoch.plan(), unleased, shares);
  return shares;
}

bool HandsOutSplitsTo(const EpochState& epoch, int32_t consumer) {
  if (epoch.finished()) return false;
  if (!IsEqual(epoch)) return epoch.next_split() < epoch.plan_size();
  if (consumer < 0 || consumer >= epoch.shares_size()) return false;
  const ConsumerShare& share = epoch.shares(consumer);
  return share.leased() < share.plan_index_size();
}

std::vector<int64_t> NextPlanIndices(const EpochState& epoch, int32_t consumer, int64_t max) {
  std::vector<int64_t> next;
  if (!HandsOutSplitsTo(epoch, consumer)) return next;
  if (!IsEqual(epoch)) {
    const int64_t n = std::min(max, epoch.plan_size() - epoch.next_split());
    for (int64_t i = 0; i < n; ++i) next.push_back(epoch.next_split() + i);
    return next;
  }
  const ConsumerShare& share = epoch.shares(consumer);
  const int64_t n = std::min(max, share.plan_index_size() - share.leased());
  for (int64_t i = 0; i < n; ++i) next.push_back(share.plan_index(share.leased() + i));
  return next;
}

void MarkLeased(EpochState& epoch, int32_t consumer, int64_t count) {
  if (IsEqual(epoch)) {
    ConsumerShare& share = *epoch.mutable_shares(consumer);
    share.set_leased(share.leased() + count);
  }
  epoch.set_next_split(epoch.next_split() + count);
}

std::vector<int64_t> LeasedPlanIndices(const EpochState& epoch) {
  std::vector<int64_t> leased;
  if (!IsEqual(epoch)) {
    for (int64_t i = 0; i < epoch.next_split(); ++i) leased.push_back(i);
    return leased;
  }
  for (const ConsumerShare& share : epoch.shares()) {
    const int64_t n = std::clamp<int64_t>(share.leased(), 0, share.plan_index_size());
    leased.insert(leased.end(), share.plan_index().begin(), share.plan_index().begin() + n);
  }
  std::sort(leased.begin(), leased.end());
  return leased;
}

OtherShares OthersOf(int32_t self, const std::vector<ConsumerCount>& counts, Remainder remainder) {
  OtherShares others;
  others.set_remainder(remainder);
  int64_t min_at_least = std::numeric_limits<int64_t>::max();
  int64_t max_at_least = 0;
  bool final = true;
  for (int32_t c = 0; c < static_cast<int32_t>(counts.size()); ++c) {
    if (c == self) continue;
    min_at_least = std::min(min_at_least, counts[c].at_least);
    max_at_least = std::max(max_at_least, counts[c].at_least);
    final = final && counts[c].final;
    if (counts[c].final && (!others.any_final() || counts[c].at_least < others.min_final())) {
      others.set_any_final(true);
      others.set_min_final(counts[c].at_least);
    }
  }
  others.set_num_others(static_cast<int32_t>(counts.size()) - 1);
  others.set_min_at_least(counts.size() > 1 ? min_at_least : 0);
  others.set_max_at_least(max_at_least);
  others.set_final(final);
  return others;
}

}  // namespace granary
