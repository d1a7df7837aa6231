// simulate_cost: costs wall time, not CPU (issue 17). It sleeps `us_per_element` microseconds
// and passes the element on unchanged — so that N worker processes on a 2-core machine behave
// like N machines (a worker's throughput scales with the worker count as separate hosts' would),
// which is how the resource policies are measured here (bench/policy_bench).
#include <chrono>
#include <thread>

#include "common/status_macros.h"
#include "pipeline/spec/udf_declarations.h"
#include "pipeline/udfs/builtin_udfs.h"

namespace granary {
namespace {

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
  UdfInfo info = SimulateCostUdfDeclaration();
  info.factory = [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
    ASSIGN_OR_RETURN(const int64_t us, ReadSimulateCostConfig(p));
    return std::make_unique<SimulateCost>(us);
  };
  registry->Register(std::move(info)).IgnoreError();
}

}  // namespace granary
