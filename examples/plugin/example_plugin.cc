// An example UDF plugin. Build it as a shared library linked against granary_pipeline and load
// it with `granary local --plugin libgranary_example_plugin.so`. It registers one UDF:
//
//   random_jitter (map): adds a uniform random integer in [-amplitude, amplitude] to every
//     value of int64 tensor `index`. Like every Granary UDF it draws only from
//     StatelessRandom(call.random_key), so a recomputed element gets the same jitter.
#include <memory>

#include "common/stateless_random.h"
#include "common/status_macros.h"
#include "pipeline/core/udf.h"
#include "pipeline/core/udf_tensor_access.h"

namespace {

class RandomJitter : public granary::Udf {
 public:
  RandomJitter(int64_t index, int64_t amplitude) : index_(index), amplitude_(amplitude) {}

  absl::Status Map(granary::Element& element, const granary::UdfCall& call) const override {
    ASSIGN_OR_RETURN(granary::Tensor * t,
                     granary::MutableTensorAt(element, index_, granary::DT_INT64, "random_jitter"));
    granary::StatelessRandom rng(call.random_key);
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      t->data<int64_t>()[i] += static_cast<int64_t>(rng.Uniform(2 * amplitude_ + 1)) - amplitude_;
    }
    return absl::OkStatus();
  }

 private:
  const int64_t index_;
  const int64_t amplitude_;
};

}  // namespace

extern "C" void GranaryRegisterUdfs(granary::UdfRegistry* registry) {
  granary::UdfInfo info;
  info.name = "random_jitter";
  info.kind = granary::UdfKind::kMap;
  info.params = {{"index", granary::ParamType::kInt},
                 {"amplitude", granary::ParamType::kInt, true}};
  info.factory = [](const granary::Params& p) -> absl::StatusOr<std::unique_ptr<granary::Udf>> {
    const int64_t amplitude = p.GetInt("amplitude");
    if (amplitude < 0) return p.Invalid("amplitude", "must not be negative");
    return std::make_unique<RandomJitter>(p.GetInt("index"), amplitude);
  };
  registry->Register(std::move(info)).IgnoreError();
}
