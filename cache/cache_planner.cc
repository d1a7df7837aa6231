#include "cache/cache_planner.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace granary {
namespace {

bool ValidSeconds(double seconds) { return std::isfinite(seconds) && seconds >= 0; }

// Seconds per sample of the ops after candidate `i` (the segments of the later candidates and
// the tail).
double OpsAfter(const CacheProfile& profile, int i) {
  double seconds = profile.tail_seconds();
  for (int j = i + 1; j < profile.points_size(); ++j)
    seconds += profile.points(j).segment_seconds();
  return seconds;
}

}  // namespace

absl::Status CheckCacheProfile(const CacheProfile& profile, const std::vector<int>& candidates) {
  if (profile.sample_records() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache profile: a sample of ", profile.sample_records(), " records"));
  }
  if (profile.estimated_records() < profile.sample_records()) {
    return absl::InvalidArgumentError(absl::StrCat("cache profile: ", profile.estimated_records(),
                                                   " records estimated for the epoch, fewer "
                                                   "than the sample's ",
                                                   profile.sample_records()));
  }
  if (profile.points_size() != static_cast<int>(candidates.size())) {
    return absl::InvalidArgumentError(absl::StrCat("cache profile: ", profile.points_size(),
                                                   " points measured, the pipeline has ",
                                                   candidates.size(), " marks"));
  }
  if (!ValidSeconds(profile.tail_seconds())) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache profile: tail seconds ", profile.tail_seconds()));
  }
  for (int i = 0; i < profile.points_size(); ++i) {
    const CachePointProfile& point = profile.points(i);
    if (point.cache_point() != candidates[i]) {
      return absl::InvalidArgumentError(absl::StrCat("cache profile: point ", i, " is ",
                                                     point.cache_point(), ", the mark's is ",
                                                     candidates[i]));
    }
    if (!ValidSeconds(point.segment_seconds()) || !ValidSeconds(point.write_seconds()) ||
        !ValidSeconds(point.read_seconds()) || point.elements() < 0 || point.bytes() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("cache profile: point ", point.cache_point(),
                                                     " has a negative or non-finite measure"));
    }
  }
  return absl::OkStatus();
}

int64_t EstimatedCacheBytes(const CacheProfile& profile, int point) {
  for (const CachePointProfile& p : profile.points()) {
    if (p.cache_point() != point || profile.sample_records() <= 0) continue;
    const double scale =
        static_cast<double>(profile.estimated_records()) / profile.sample_records();
    return static_cast<int64_t>(std::ceil(static_cast<double>(p.bytes()) * scale));
  }
  return 0;
}

CacheDecision PlanCache(const CachePlanInput& input, const CachePlanOptions& options) {
  const CacheProfile& profile = input.profile;
  const double epochs = input.epochs > 0 ? input.epochs : kUnboundedEpochs;
  double compute_per_epoch = OpsAfter(profile, -1);
  const double compute = epochs * compute_per_epoch;

  CacheDecision decision;
  *decision.mutable_profile() = profile;
  std::string reason =
      absl::StrFormat("over %g epochs, per sample epoch: compute %.3gs", epochs, compute_per_epoch);
  double best = compute * (1 - options.min_gain);
  for (int i = 0; i < profile.points_size(); ++i) {
    const CachePointProfile& point = profile.points(i);
    const double get = point.read_seconds() + OpsAfter(profile, i);
    const bool existing = input.existing_points.count(point.cache_point()) > 0;
    const double total =
        existing ? epochs * get : compute_per_epoch + point.write_seconds() + (epochs - 1) * get;
    absl::StrAppendFormat(&reason, "; at op %d %s %.3gs then %.3gs", point.cache_point(),
                          existing ? "get" : "put",
                          existing ? get : compute_per_epoch + point.write_seconds(), get);
    if (!existing && input.room_bytes.has_value() &&
        EstimatedCacheBytes(profile, point.cache_point()) > *input.room_bytes) {
      absl::StrAppend(&reason, " (", EstimatedCacheBytes(profile, point.cache_point()),
                      " bytes: no room)");
      continue;
    }
    if (total < best) {
      best = total;
      decision.set_cache_point(point.cache_point());
    }
  }
  decision.set_reason(absl::StrCat(decision.cache_point() == 0
                                       ? "compute"
                                       : absl::StrCat("cache at op ", decision.cache_point()),
                                   " (", reason, ")"));
  return decision;
}

std::optional<std::vector<std::string>> EvictionsToFit(std::vector<CacheUsage> caches,
                                                       int64_t incoming, int64_t capacity) {
  int64_t used = 0;
  for (const CacheUsage& c : caches) used += c.bytes;
  std::sort(caches.begin(), caches.end(), [](const CacheUsage& a, const CacheUsage& b) {
    return a.last_used_seq != b.last_used_seq ? a.last_used_seq < b.last_used_seq
                                              : a.cache_key < b.cache_key;
  });
  std::vector<std::string> evicted;
  for (const CacheUsage& c : caches) {
    if (used + incoming <= capacity) break;
    if (c.in_use) continue;
    used -= c.bytes;
    evicted.push_back(c.cache_key);
  }
  if (used + incoming > capacity) return std::nullopt;
  return evicted;
}

}  // namespace granary
