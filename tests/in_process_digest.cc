#include "tests/in_process_digest.h"

#include "common/env.h"
#include "gtest/gtest.h"
#include "pipeline/digests/epoch_digest.h"
#include "pipeline/local_runner.h"
#include "pipeline/pipeline.h"
#include "pipeline/core/udf.h"

namespace granary::testing {

InProcessDigest DigestInProcess(const PipelineDef& def, uint64_t seed, int64_t epoch) {
  const auto pipeline = granary::Pipeline::Create(def, PipelineRegistries::WithBuiltins());
  EXPECT_TRUE(pipeline.ok()) << pipeline.status();
  if (!pipeline.ok()) return {};
  EpochDigest digest(true);
  EpochRunOptions options;
  options.on_element = [&](const Element& e) { digest.Add(e); };
  const auto ran = RunEpochInProcess(**pipeline, seed, epoch, Env::Default(), options);
  EXPECT_TRUE(ran.ok()) << ran.status();
  return {digest.multiset(), digest.rows()};
}

}  // namespace granary::testing
