// Cache placement (cache/cache_policy.h): policies, cache points, cache keys, the Put and Get
// rewrites of a pipeline (which keep the user's op indices), and the local runner's pinning of
// the cached prefix to epoch 0.
#include "cache/cache_policy.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/cache_chunk_format.h"
#include "cache/cache_ops.h"
#include "common/deterministic_serialization.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/local_runner.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "pipeline/core/split_provider.h"
#include "pipeline/sources/tfrecord_writer.h"
#include "testing/scoped_temp_dir.h"
#include "testing/test_paths.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

PipelineDef Parse(const std::string& json) {
  auto def = ParsePipelineJson(json, "cache_policy_test.json");
  EXPECT_TRUE(def.ok()) << def.status();
  return def.ok() ? *def : PipelineDef();
}

std::string Bytes(const google::protobuf::Message& m) { return SerializeDeterministically(m); }

// range -> shuffle (op 0) -> mark (op 1) -> map add (op 2).
constexpr char kMarked[] = R"({"source": {"type": "range", "params": {"stop": 100}}, "ops": [
    {"op": "shuffle", "params": {"buffer_size": 16}},
    {"op": "mark", "params": {"name": "m"}},
    {"op": "map", "udf": "add", "udfParams": {"value": 1}}]})";

TEST(CachePolicyTest, ParseAcceptsTheFourPoliciesRejectsOthersAndNamesRoundTrip) {
  for (const auto& [name, policy] : std::vector<std::pair<std::string, CachePolicy>>{
           {"compute", CACHE_COMPUTE},
           {"full", CACHE_FULL},
           {"at_mark", CACHE_AT_MARK},
           {"auto", CACHE_AUTO}}) {
    auto parsed = ParseCachePolicy(name);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    EXPECT_EQ(*parsed, policy) << name;
    EXPECT_EQ(CachePolicyName(policy), name);
    auto again = ParseCachePolicy(CachePolicyName(policy));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, policy);
  }
  for (const std::string bad : {"always", "Full", "", "at-mark", "Auto"}) {
    auto parsed = ParseCachePolicy(bad);
    ASSERT_FALSE(parsed.ok()) << "'" << bad << "' accepted";
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr(absl::StrCat("'", bad, "'")));
  }
}

TEST(CachePolicyTest, CachePointIsNoneAllOpsOrJustAfterTheFirstMark) {
  const PipelineDef marked = Parse(R"({"source": {"type": "range", "params": {"stop": 10}},
      "ops": [{"op": "shuffle", "params": {"buffer_size": 4}}, {"op": "shuffle", "params": {"buffer_size": 2}},
              {"op": "mark"}, {"op": "map", "udf": "add", "udfParams": {"value": 1}},
              {"op": "mark"}, {"op": "batch", "params": {"batch_size": 2}}]})");
  ASSERT_EQ(marked.ops_size(), 6);

  auto compute = CachePoint(marked, CACHE_COMPUTE);
  ASSERT_TRUE(compute.ok());
  EXPECT_FALSE(compute->has_value());

  auto full = CachePoint(marked, CACHE_FULL);
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(full->has_value());
  EXPECT_EQ(**full, 6);

  auto at_mark = CachePoint(marked, CACHE_AT_MARK);
  ASSERT_TRUE(at_mark.ok());
  ASSERT_TRUE(at_mark->has_value());
  EXPECT_EQ(**at_mark, 3) << "first mark is op 2";

  const PipelineDef unmarked = Parse(R"({"source": {"type": "range", "params": {"stop": 10}},
      "ops": [{"op": "shuffle", "params": {"buffer_size": 4}}]})");
  auto none = CachePoint(unmarked, CACHE_AT_MARK);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("mark"));
}

TEST(CachePolicyTest, AutoPinsEveryOpUpToTheLastMarkWhateverItDecides) {
  const PipelineDef marked = Parse(R"({"source": {"type": "range", "params": {"stop": 10}},
      "ops": [{"op": "shuffle", "params": {"buffer_size": 4}}, {"op": "mark"},
              {"op": "map", "udf": "add", "udfParams": {"value": 1}}, {"op": "mark"},
              {"op": "batch", "params": {"batch_size": 2}}]})");
  EXPECT_THAT(MarkPoints(marked), ::testing::ElementsAre(2, 4));
  auto pinned = PinnedPrefixOps(marked, CACHE_AUTO);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  ASSERT_TRUE(pinned->has_value());
  EXPECT_EQ(**pinned, 4) << "the last mark is op 3";
  // The others pin their cache point (and compute nothing).
  EXPECT_EQ(**PinnedPrefixOps(marked, CACHE_AT_MARK), 2);
  EXPECT_EQ(**PinnedPrefixOps(marked, CACHE_FULL), 5);
  EXPECT_FALSE(PinnedPrefixOps(marked, CACHE_COMPUTE)->has_value());
  // Its cache point is the dispatcher's decision, never CachePoint's.
  EXPECT_EQ(CachePoint(marked, CACHE_AUTO).status().code(), absl::StatusCode::kInvalidArgument);
  const PipelineDef unmarked = Parse(R"({"source": {"type": "range", "params": {"stop": 10}}})");
  auto none = PinnedPrefixOps(unmarked, CACHE_AUTO);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("no mark op to cache at"));
  EXPECT_TRUE(MarkPoints(unmarked).empty());
}

TEST(CachePolicyTest, CacheKeyDependsOnPrefixAndSeedOnly) {
  const PipelineDef def = Parse(kMarked);
  const int point = 2;
  // The same definition written differently (key order, spacing) has the same key.
  const PipelineDef same = Parse(R"({"ops": [
      {"params": {"buffer_size": 16}, "op": "shuffle"}, {"params": {"name": "m"}, "op": "mark"},
      {"udfParams": {"value": 1}, "udf": "add", "op": "map"}],
      "source": {"params": {"stop": 100}, "type": "range"}})");
  EXPECT_EQ(CacheKey(def, point, 7), CacheKey(same, point, 7));
  EXPECT_FALSE(CacheKey(def, point, 7).empty());

  EXPECT_NE(CacheKey(def, point, 7), CacheKey(def, point, 8)) << "seed";
  EXPECT_EQ(CacheKey(def, point, 7, ""), CacheKey(def, point, 7)) << "no identity: as before";
  EXPECT_NE(CacheKey(def, point, 7, "/srv/a"), CacheKey(def, point, 7)) << "data identity";
  EXPECT_NE(CacheKey(def, point, 7, "/srv/a"), CacheKey(def, point, 7, "/srv/b"))
      << "data identity";

  PipelineDef prefix_changed = def;
  (*prefix_changed.mutable_ops(0)->mutable_params()->mutable_fields())["buffer_size"]
      .set_number_value(17);
  EXPECT_NE(CacheKey(def, point, 7), CacheKey(prefix_changed, point, 7)) << "op 0 changed";

  PipelineDef source_changed = def;
  (*source_changed.mutable_source()->mutable_params()->mutable_fields())["stop"]
      .set_number_value(101);
  EXPECT_NE(CacheKey(def, point, 7), CacheKey(source_changed, point, 7)) << "source changed";

  PipelineDef suffix_changed = def;
  (*suffix_changed.mutable_ops(2)->mutable_udf_params()->mutable_fields())["value"]
      .set_number_value(2);
  ASSERT_NE(Bytes(suffix_changed), Bytes(def));
  EXPECT_EQ(CacheKey(def, point, 7), CacheKey(suffix_changed, point, 7))
      << "op 2 is after the cache point";
  PipelineDef suffix_added = def;
  suffix_added.add_ops()->set_op("prefetch");
  EXPECT_EQ(CacheKey(def, point, 7), CacheKey(suffix_added, point, 7));
}

TEST(CachePolicyTest, WithCacheWriteInsertsOneCacheWriteAtThePointAndReadingFromCacheKeepsTheRest) {
  const PipelineDef def = Parse(kMarked);
  for (int point = 0; point <= def.ops_size(); ++point) {
    SCOPED_TRACE(absl::StrCat("cache point ", point));
    const PipelineDef put = WithCacheWrite(def, point);
    EXPECT_EQ(Bytes(put.source()), Bytes(def.source()));
    ASSERT_EQ(put.ops_size(), def.ops_size() + 1);
    int writes = 0;
    for (const OpDef& op : put.ops()) writes += op.op() == "cache_write";
    EXPECT_EQ(writes, 1);
    EXPECT_EQ(put.ops(point).op(), "cache_write");
    for (int i = 0; i < def.ops_size(); ++i) {
      EXPECT_EQ(Bytes(put.ops(i < point ? i : i + 1)), Bytes(def.ops(i))) << "op " << i;
    }
    EXPECT_EQ(put.cached_ops(), 0);

    const PipelineDef get = ReadingFromCache(def, point, "/cache/k");
    EXPECT_EQ(get.source().type(), "cache_read");
    const auto& files = get.source().params().fields().at("files").list_value();
    ASSERT_EQ(files.values_size(), 1);
    EXPECT_EQ(files.values(0).string_value(), "/cache/k/*.chunk");
    EXPECT_EQ(get.cached_ops(), point);
    ASSERT_EQ(get.ops_size(), def.ops_size() - point);
    for (int i = point; i < def.ops_size(); ++i) {
      EXPECT_EQ(Bytes(get.ops(i - point)), Bytes(def.ops(i))) << "op " << i;
    }
    for (const OpDef& op : get.ops()) EXPECT_NE(op.op(), "cache_write");
    // Both rewrites are valid pipelines.
    EXPECT_TRUE(Pipeline::Create(put, PipelineRegistriesWithCache()).ok());
    EXPECT_TRUE(Pipeline::Create(get, PipelineRegistriesWithCache()).ok());
  }
}

// An invalid UDF param on op 4 is reported as op 4 by the user's pipeline, by its Put rewrite
// (cache_write inserted before it does not count) and by its Get rewrite (the cache_read source
// stands in for ops 0..2, so op 4 is the rewrite's second op).
TEST(CachePolicyTest, RewritesKeepTheUsersOpIndicesInErrorLabels) {
  const PipelineDef def = Parse(R"({"source": {"type": "range", "params": {"stop": 100}}, "ops": [
      {"op": "shuffle", "params": {"buffer_size": 16}},
      {"op": "mark"},
      {"op": "map", "udf": "add", "udfParams": {"value": 1}},
      {"op": "map", "udf": "add", "udfParams": {"value": 2}},
      {"op": "map", "udf": "add", "udfParams": {"value": true}}]})");
  const std::string label = "op 4 (map, udf 'add'): param 'value' must be an integer";
  for (const auto& [what, rewritten] : std::vector<std::pair<std::string, PipelineDef>>{
           {"user's pipeline", def},
           {"Put at op 2", WithCacheWrite(def, 2)},
           {"Put at op 3", WithCacheWrite(def, 3)},
           {"Get from op 2", ReadingFromCache(def, 2, "/cache/k")},
           {"Get from op 3", ReadingFromCache(def, 3, "/cache/k")}}) {
    auto pipeline = Pipeline::Create(rewritten, PipelineRegistriesWithCache());
    ASSERT_FALSE(pipeline.ok()) << what;
    EXPECT_THAT(pipeline.status().message(), HasSubstr(label)) << what;
  }
}

// The ops after the cache point draw their randomness with their own index: random_crop (op 3)
// and random_flip (op 4) run on elements read back from a cache chunk yield exactly what they
// yield in the user's pipeline.
TEST(CachePolicyTest, GetRewriteDrawsTheSameRandomnessAsTheUsersPipeline) {
  const std::string source = absl::StrCat(R"({"source": {"type": "tfrecord", "params":
      {"files": [")", testing::TfRecordTestDataDir(), R"(/tutorial_images.tfrecord"]}})");
  const std::string prefix_ops = R"(
      {"op": "map", "udf": "parse_example", "udfParams": {"keys": ["image_raw"], "dtypes": ["bytes"]}},
      {"op": "map", "udf": "decode_image", "udfParams": {"channels": 3}},
      {"op": "mark"})";
  const PipelineDef def = Parse(absl::StrCat(source, R"(, "ops": [)", prefix_ops, R"(,
      {"op": "map", "udf": "random_crop", "udfParams": {"height": 20, "width": 20}},
      {"op": "map", "udf": "random_flip"}]})"));
  const PipelineDef prefix_def = Parse(absl::StrCat(source, R"(, "ops": [)", prefix_ops, "]}"));
  constexpr uint64_t kSeed = 11;
  constexpr int64_t kEpoch = 2;
  auto point = CachePoint(def, CACHE_AT_MARK);
  ASSERT_TRUE(point.ok() && point->has_value());
  ASSERT_EQ(**point, 3);

  // What the user's pipeline yields in epoch 2 of an at_mark job.
  auto pipeline = Pipeline::Create(def, PipelineRegistriesWithCache());
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  std::vector<Element> expected;
  EpochRunOptions options;
  options.pinned_prefix_ops = **point;
  options.on_element = [&](const Element& e) { expected.push_back(e); };
  ASSERT_TRUE(RunEpochInProcess(**pipeline, kSeed, kEpoch, Env::Default(), options).ok());
  ASSERT_GE(expected.size(), 2u);

  // The cached prefix (epoch 0), written as one chunk.
  auto prefix = Pipeline::Create(prefix_def, PipelineRegistriesWithCache());
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  std::vector<Element> cached;
  EpochRunOptions prefix_options;
  prefix_options.on_element = [&](const Element& e) { cached.push_back(e); };
  ASSERT_TRUE(RunEpochInProcess(**prefix, kSeed, 0, Env::Default(), prefix_options).ok());
  ASSERT_EQ(cached.size(), expected.size());
  testing::ScopedTempDir dir;
  google::protobuf::RepeatedPtrField<CacheChunk> chunks;
  CacheChunk& chunk = *chunks.Add();
  chunk.set_path(dir.Join(absl::StrCat("t1-g1-i0-n", cached.size(), ".chunk")));
  chunk.set_task_id(1);
  chunk.set_generation(1);
  chunk.set_num_elements(cached.size());
  {
    auto file = Env::Default()->NewWritableFile(chunk.path());
    ASSERT_TRUE(file.ok()) << file.status();
    TfRecordWriter writer(std::move(file).value());
    for (size_t i = 0; i < cached.size(); ++i) {
      ASSERT_TRUE(writer.Write(EncodeCachedElement(i, cached[i])).ok());
    }
    ASSERT_TRUE(writer.Close().ok());
  }

  // The Get rewrite over that chunk, as a Get epoch's task runs it.
  const PipelineDef get_def = ReadingFromCache(def, **point, dir.path());
  auto get = Pipeline::Create(get_def, PipelineRegistriesWithCache());
  ASSERT_TRUE(get.ok()) << get.status();
  IteratorContext ctx{Env::Default(), kSeed, kEpoch};
  ctx.cached_prefix_ops = **point;
  std::vector<Split> splits = ChunkSplits(chunks);
  ASSERT_EQ(splits.size(), 1u);
  auto it = (*get)->MakeIterator(ctx, std::make_unique<PlannedSplitProvider>(splits));
  ASSERT_TRUE(it.ok()) << it.status();
  std::vector<Element> actual;
  while (true) {
    Element e;
    bool end = false;
    const absl::Status status = (*it)->GetNext(&e, &end);
    ASSERT_TRUE(status.ok()) << status;
    if (end) break;
    actual.push_back(std::move(e));
  }
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(actual[i] == expected[i]) << "element " << i << " (seed 11, epoch 2)";
  }
  // Sanity: the ops after the mark do change the elements in this epoch (else the comparison
  // above would not see a wrong op index).
  bool any_changed = false;
  for (size_t i = 0; i < cached.size(); ++i) any_changed |= !(cached[i] == expected[i]);
  EXPECT_TRUE(any_changed);
}

// The digest fields of an EpochResult::digest_line (which also holds the epoch number).
std::string Field(const std::string& line, const std::string& name) {
  const std::string key = absl::StrCat("\"", name, "\":\"");
  const size_t at = line.find(key);
  EXPECT_NE(at, std::string::npos) << name << " in " << line;
  if (at == std::string::npos) return "";
  const size_t start = at + key.size();
  return line.substr(start, line.find('"', start) - start);
}

struct Digests {
  std::string multiset;
  std::string ordered;
  int64_t rows;
};

Digests RunEpoch(const std::string& json, CachePolicy policy, int64_t epoch) {
  const PipelineDef def = Parse(json);
  auto pipeline = Pipeline::Create(def, PipelineRegistriesWithCache());
  EXPECT_TRUE(pipeline.ok()) << pipeline.status();
  if (!pipeline.ok()) return {};
  EpochRunOptions options;
  const absl::StatusOr<std::optional<int>> pinned = PinnedPrefixOps(def, policy);
  EXPECT_TRUE(pinned.ok()) << pinned.status();
  if (!pinned.ok()) return {};
  options.pinned_prefix_ops = *pinned;
  auto result = RunEpochInProcess(**pipeline, 5, epoch, Env::Default(), options);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  return {Field(result->digest_line, "multiset_xxh64"), Field(result->digest_line, "ordered_xxh64"),
          result->rows};
}

constexpr char kShuffledRange[] = R"({"source": {"type": "range", "params":
    {"stop": 2000, "elements_per_split": 100, "shuffle_splits": true}}, "ops": [
    {"op": "shuffle", "params": {"buffer_size": 64}})";

TEST(LocalRunnerCacheTest, FullPolicyPinsTheWholePipelineComputeDoesNot) {
  const std::string json = absl::StrCat(kShuffledRange, "]}");
  const Digests full0 = RunEpoch(json, CACHE_FULL, 0);
  const Digests full1 = RunEpoch(json, CACHE_FULL, 1);
  const Digests compute0 = RunEpoch(json, CACHE_COMPUTE, 0);
  const Digests compute1 = RunEpoch(json, CACHE_COMPUTE, 1);
  EXPECT_EQ(full0.rows, 2000);
  EXPECT_EQ(full1.multiset, full0.multiset);
  EXPECT_EQ(full1.ordered, full0.ordered) << "full: epoch 1 serves epoch 0's output in order";
  EXPECT_EQ(compute1.multiset, compute0.multiset);
  EXPECT_NE(compute1.ordered, compute0.ordered) << "compute: each epoch is shuffled anew";
  // Epoch 0 is the same computation under either policy.
  EXPECT_EQ(full0.ordered, compute0.ordered);
}

TEST(LocalRunnerCacheTest, AtMarkPinsThePrefixOnly) {
  // The first 300 elements of the shuffled prefix: under at_mark they are the same elements in
  // the same order every epoch; under compute another selection.
  const std::string take = absl::StrCat(kShuffledRange, R"(, {"op": "mark"},
      {"op": "take", "params": {"count": 300}}]})");
  const Digests mark0 = RunEpoch(take, CACHE_AT_MARK, 0);
  const Digests mark1 = RunEpoch(take, CACHE_AT_MARK, 1);
  const Digests compute0 = RunEpoch(take, CACHE_COMPUTE, 0);
  const Digests compute1 = RunEpoch(take, CACHE_COMPUTE, 1);
  EXPECT_EQ(mark0.rows, 300);
  EXPECT_EQ(mark1.multiset, mark0.multiset);
  EXPECT_EQ(mark1.ordered, mark0.ordered);
  EXPECT_NE(compute1.multiset, compute0.multiset);

  // A shuffle after the mark runs with the real epoch: same elements, another order.
  const std::string reshuffled = absl::StrCat(kShuffledRange, R"(, {"op": "mark"},
      {"op": "shuffle", "params": {"buffer_size": 64}}]})");
  const Digests after0 = RunEpoch(reshuffled, CACHE_AT_MARK, 0);
  const Digests after1 = RunEpoch(reshuffled, CACHE_AT_MARK, 1);
  EXPECT_EQ(after1.multiset, after0.multiset);
  EXPECT_NE(after1.ordered, after0.ordered);
  // While under full the same pipeline is pinned entirely.
  EXPECT_EQ(RunEpoch(reshuffled, CACHE_FULL, 1).ordered, RunEpoch(reshuffled, CACHE_FULL, 0).ordered);
}

}  // namespace
}  // namespace granary
