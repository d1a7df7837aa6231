#include "cache/cache_policy.h"

#include "absl/strings/str_cat.h"
#include "common/deterministic_serialization.h"
#include "common/hash.h"

namespace granary {

absl::StatusOr<CachePolicy> ParseCachePolicy(absl::string_view name) {
  if (name == "compute") return CACHE_COMPUTE;
  if (name == "full") return CACHE_FULL;
  if (name == "at_mark") return CACHE_AT_MARK;
  if (name == "auto") return CACHE_AUTO;
  return absl::InvalidArgumentError(absl::StrCat("unknown cache policy '", name,
                                                 "' (known: compute, full, at_mark, auto)"));
}

std::string CachePolicyName(CachePolicy policy) {
  switch (policy) {
    case CACHE_FULL:
      return "full";
    case CACHE_AT_MARK:
      return "at_mark";
    case CACHE_AUTO:
      return "auto";
    default:
      return "compute";
  }
}

absl::StatusOr<std::optional<int>> CachePoint(const PipelineDef& def, CachePolicy policy) {
  switch (policy) {
    case CACHE_FULL:
      return def.ops_size();
    case CACHE_AT_MARK: {
      const std::vector<int> marks = MarkPoints(def);
      if (marks.empty()) {
        return absl::InvalidArgumentError(
            "cache_policy at_mark: the pipeline has no mark op to cache at");
      }
      return marks.front();
    }
    case CACHE_AUTO:
      return absl::InvalidArgumentError(
          "cache_policy auto: the dispatcher decides the cache point (JobState.cache_decision)");
    default:
      return std::nullopt;
  }
}

absl::StatusOr<std::optional<int>> PinnedPrefixOps(const PipelineDef& def, CachePolicy policy) {
  if (policy != CACHE_AUTO) return CachePoint(def, policy);
  const std::vector<int> marks = MarkPoints(def);
  if (marks.empty()) {
    return absl::InvalidArgumentError(
        "cache_policy auto: the pipeline has no mark op to cache at (a mark marks where caching "
        "is acceptable; one as the last op allows caching the whole output)");
  }
  return marks.back();
}

std::vector<int> MarkPoints(const PipelineDef& def) {
  std::vector<int> points;
  for (int i = 0; i < def.ops_size(); ++i) {
    if (def.ops(i).op() == "mark") points.push_back(i + 1);
  }
  return points;
}

PipelineDef CachedPrefix(const PipelineDef& def, int cache_point) {
  PipelineDef prefix;
  *prefix.mutable_source() = def.source();
  for (int i = 0; i < cache_point && i < def.ops_size(); ++i) *prefix.add_ops() = def.ops(i);
  return prefix;
}

std::string CacheKey(const PipelineDef& def, int cache_point, uint64_t seed,
                     absl::string_view data_identity) {
  std::string bytes = SerializeDeterministically(CachedPrefix(def, cache_point));
  // After a whole serialized message a 0 byte can only be this separator (0 is never a field's
  // tag), so no (prefix, identity) pair hashes the bytes of another.
  if (!data_identity.empty()) absl::StrAppend(&bytes, absl::string_view("\0", 1), data_identity);
  return HashToHex(Hash64(bytes, seed));
}

PipelineDef WithCacheWrite(const PipelineDef& def, int cache_point) {
  PipelineDef out;
  *out.mutable_source() = def.source();
  for (int i = 0; i <= def.ops_size(); ++i) {
    if (i == cache_point) out.add_ops()->set_op("cache_write");
    if (i < def.ops_size()) *out.add_ops() = def.ops(i);
  }
  return out;
}

PipelineDef ReadingFromCache(const PipelineDef& def, int cache_point,
                             const std::string& cache_dir) {
  PipelineDef out;
  out.mutable_source()->set_type("cache_read");
  (*out.mutable_source()->mutable_params()->mutable_fields())["files"]
      .mutable_list_value()
      ->add_values()
      ->set_string_value(cache_dir + "/*.chunk");
  out.set_cached_ops(cache_point);
  for (int i = cache_point; i < def.ops_size(); ++i) *out.add_ops() = def.ops(i);
  return out;
}

std::vector<Split> ChunkSplits(const google::protobuf::RepeatedPtrField<CacheChunk>& chunks) {
  std::vector<Split> splits;
  for (const CacheChunk& chunk : chunks) {
    Split& split = splits.emplace_back();
    split.set_id(splits.size() - 1);
    split.set_file(chunk.path());
    split.set_num_records(chunk.num_elements());
    *split.mutable_cache_chunk() = chunk;
  }
  return splits;
}

}  // namespace granary
