// simulate_cost: costs wall time, not CPU (issue 17). It sleeps `us_per_element` microseconds
// and passes the element on unchanged — so that N worker processes on a 2-core machine behave
// like N machines (a worker's throughput scales with the worker count as separate hosts' would),
// which is how the resource policies are measured here (bench/policy_bench).
#include <chrono>
#include <thread>

#include "pipeline/udfs/builtin_udfs.h"

namespace granary {
namespace {

constexpr int64_t kMaxMicroseconds = 10'000'000;

class SimulateCost : public Udf {
 public:
  explicit SimulateCost(int64_t us) : us_(us) {}
  absl::Status Map(Element&, const UdfCall&) const override {
    std::this_thread::sleep_for(std::chrono::microseconds(us_));
    return absl::OkStatus();
  }

 private:
  const int64_t us_;
};

}  // namespace

void RegisterSimulateCostUdf(UdfRegistry* registry) {
  registry
      ->Register({"simulate_cost",
                  UdfKind::kMap,
                  {{"us_per_element", ParamType::kInt, true}},
                  [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
                    const int64_t us = p.GetInt("us_per_element");
                    if (us < 0 || us > kMaxMicroseconds) {
                      return p.Invalid("us_per_element", "must be in [0, 10^7]");
                    }
                    return std::make_unique<SimulateCost>(us);
                  }})
      .IgnoreError();
}

}  // namespace granary
