#include "pipeline/spec/op_declarations.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "pipeline/core/limits.h"

namespace granary {
namespace {

// OpInfo::autotuned of an op whose int param `name`, when given as 0, leaves its knob to the
// autotuner.
std::function<bool(const Params&)> TunedWhenZero(const char* name) {
  return [name](const Params& params) { return params.Has(name) && params.GetInt(name) == 0; };
}

// An op that calls a UDF of `kind` on each element (map, parallel_map, filter); a map UDF's op
// maps each element alone, so that runs of them fuse.
OpInfo UdfOpDeclaration(const char* name, UdfKind kind) {
  OpInfo info;
  info.name = name;
  info.takes_udf = true;
  info.udf_kind = kind;
  info.maps_elements = kind == UdfKind::kMap;
  return info;
}

// take and skip: one required param, `count`, not negative.
OpInfo CountOpDeclaration(const char* name) {
  OpInfo info;
  info.name = name;
  info.params = {{"count", ParamType::kInt, true}};
  info.validate = [](const Params& params) -> absl::Status {
    if (params.GetInt("count") < 0) return params.Invalid("count", "must not be negative");
    return absl::OkStatus();
  };
  return info;
}

}  // namespace

absl::StatusOr<int> ParallelMapThreads(const Params& params) {
  const int64_t default_threads = std::max(1u, std::thread::hardware_concurrency());
  const int64_t num_threads = params.GetInt("num_threads", default_threads);
  if (num_threads < 0 || num_threads > 256) {
    return params.Invalid("num_threads", "must be in [1, 256], or 0 (tuned)");
  }
  return static_cast<int>(num_threads);
}

int64_t PrefetchBufferSize(const Params& params) { return params.GetInt("buffer_size", 2); }

OpInfo MapOpDeclaration() { return UdfOpDeclaration("map", UdfKind::kMap); }

OpInfo ParallelMapOpDeclaration() {
  OpInfo info = UdfOpDeclaration("parallel_map", UdfKind::kMap);
  info.params = {{"num_threads", ParamType::kInt}};
  info.validate = [](const Params& params) { return ParallelMapThreads(params).status(); };
  info.threads = ParallelMapThreads;
  info.autotuned = TunedWhenZero("num_threads");
  return info;
}

OpInfo FilterOpDeclaration() { return UdfOpDeclaration("filter", UdfKind::kPredicate); }

OpInfo ShuffleOpDeclaration() {
  OpInfo info;
  info.name = "shuffle";
  info.params = {{"buffer_size", ParamType::kInt, true}, {"seed", ParamType::kInt}};
  info.validate = [](const Params& params) -> absl::Status {
    if (params.GetInt("buffer_size") < 1) {
      return params.Invalid("buffer_size", "must be at least 1");
    }
    return absl::OkStatus();
  };
  return info;
}

OpInfo BatchOpDeclaration() {
  OpInfo info;
  info.name = "batch";
  info.batches = true;
  info.params = {{"batch_size", ParamType::kInt, true}, {"drop_remainder", ParamType::kBool}};
  info.validate = [](const Params& params) -> absl::Status {
    const int64_t batch_size = params.GetInt("batch_size");
    if (batch_size < 1) return params.Invalid("batch_size", "must be at least 1");
    return CheckParamLimit(params, "batch_size", batch_size, kMaxBatchSize, "kMaxBatchSize");
  };
  info.placed_batch_size = [](const Params& params) { return params.GetInt("batch_size"); };
  return info;
}

OpInfo TakeOpDeclaration() { return CountOpDeclaration("take"); }

OpInfo SkipOpDeclaration() { return CountOpDeclaration("skip"); }

OpInfo PrefetchOpDeclaration() {
  OpInfo info;
  info.name = "prefetch";
  info.params = {{"buffer_size", ParamType::kInt}};
  info.validate = [](const Params& params) -> absl::Status {
    if (PrefetchBufferSize(params) < 0) {
      return params.Invalid("buffer_size", "must be at least 1, or 0 (tuned)");
    }
    return absl::OkStatus();
  };
  info.autotuned = TunedWhenZero("buffer_size");
  return info;
}

OpInfo MarkOpDeclaration() {
  OpInfo info;
  info.name = "mark";
  info.params = {{"name", ParamType::kString}};
  return info;
}

OpInfo IgnoreErrorsOpDeclaration() {
  OpInfo info;
  info.name = "ignore_errors";
  info.follows_udf_op = true;
  return info;
}

void RegisterBuiltinOpDeclarations(OpRegistry* registry) {
  for (OpInfo info :
       {MapOpDeclaration(), ParallelMapOpDeclaration(), FilterOpDeclaration(),
        ShuffleOpDeclaration(), BatchOpDeclaration(), TakeOpDeclaration(), SkipOpDeclaration(),
        PrefetchOpDeclaration(), MarkOpDeclaration(), IgnoreErrorsOpDeclaration()}) {
    registry->Register(std::move(info)).IgnoreError();
  }
}

}  // namespace granary
