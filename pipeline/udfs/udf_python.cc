#include "pipeline/udfs/udf_python.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "pipeline/spec/udf_declarations.h"
#include "pipeline/udfs/python_helper_process.h"

namespace granary {
namespace {

// The helpers of one Python UDF instance: an idle one is lent to each call, a new one started
// when none is idle. Thread-safe.
class HelperPool {
 public:
  HelperPool(PythonUdfOptions options, PythonUdfConfig config)
      : options_(std::move(options)), config_(std::move(config)) {}

  // Runs `call` on a lent helper; a helper that died during it is replaced and `call` run
  // again, once.
  template <typename Result, typename Call>
  absl::StatusOr<Result> Run(Call call) const {
    for (int attempt = 0;; ++attempt) {
      ASSIGN_OR_RETURN(std::unique_ptr<PythonHelperProcess> helper, Borrow());
      absl::StatusOr<Result> result = call(*helper);
      if (helper->alive()) {
        Return(std::move(helper));
        return result;
      }
      if (!absl::IsUnavailable(result.status())) return result;
      if (attempt == 1) {
        return absl::InternalError(absl::StrCat(
            result.status().message(), "; its replacement died on the same element too"));
      }
    }
  }

 private:
  absl::StatusOr<std::unique_ptr<PythonHelperProcess>> Borrow() const {
    {
      absl::MutexLock lock(&mu_);
      if (!idle_.empty()) {
        std::unique_ptr<PythonHelperProcess> helper = std::move(idle_.back());
        idle_.pop_back();
        return helper;
      }
    }
    return PythonHelperProcess::Start(options_.interpreter, config_.function,
                                      absl::Milliseconds(config_.timeout_ms));
  }

  void Return(std::unique_ptr<PythonHelperProcess> helper) const {
    absl::MutexLock lock(&mu_);
    idle_.push_back(std::move(helper));
  }

  const PythonUdfOptions options_;
  const PythonUdfConfig config_;
  mutable absl::Mutex mu_;
  mutable std::vector<std::unique_ptr<PythonHelperProcess>> idle_ ABSL_GUARDED_BY(mu_);
};

// Which calls are made twice to check that the function is deterministic: the first, then one
// in `every` (0: none). Thread-safe.
class DeterminismCheck {
 public:
  explicit DeterminismCheck(int64_t every) : every_(every) {}

  bool Due() const { return every_ > 0 && calls_.fetch_add(1) % every_ == 0; }

  // The error of a call whose two results differed.
  absl::Status Differed(const char* what) const {
    return absl::FailedPreconditionError(absl::StrCat(
        "the Python function ", what, " for the same element and random key when called twice "
        "(the first call and one in ", every_, " are, to check): it is not deterministic given "
        "its arguments and rng, so an element recomputed after a failure would differ from the "
        "one it replaces and exactly-once would break (docs/python.md; "
        "determinism_check_every=0 turns the check off)"));
  }

 private:
  const int64_t every_;
  mutable std::atomic<int64_t> calls_{0};
};

class PythonMap : public Udf {
 public:
  PythonMap(std::unique_ptr<HelperPool> pool, int64_t check_every)
      : pool_(std::move(pool)), check_(check_every) {}

  absl::Status Map(Element& element, const UdfCall& call) const override {
    if (!check_.Due()) return MapOnce(element, call);
    // The helper maps a serialized copy: `again` shares the input's tensors, not the output's.
    Element again = element;
    RETURN_IF_ERROR(MapOnce(element, call));
    RETURN_IF_ERROR(MapOnce(again, call));
    if (!(again.tensors == element.tensors)) return check_.Differed("returned different arrays");
    return absl::OkStatus();
  }

 private:
  absl::Status MapOnce(Element& element, const UdfCall& call) const {
    return pool_
        ->Run<bool>([&](PythonHelperProcess& helper) -> absl::StatusOr<bool> {
          RETURN_IF_ERROR(helper.Map(element, call.random_key));
          return true;
        })
        .status();
  }

  const std::unique_ptr<HelperPool> pool_;
  const DeterminismCheck check_;
};

class PythonFilter : public Udf {
 public:
  PythonFilter(std::unique_ptr<HelperPool> pool, int64_t check_every)
      : pool_(std::move(pool)), check_(check_every) {}

  absl::StatusOr<bool> Keep(const Element& element, const UdfCall& call) const override {
    ASSIGN_OR_RETURN(const bool keep, KeepOnce(element, call));
    if (!check_.Due()) return keep;
    ASSIGN_OR_RETURN(const bool again, KeepOnce(element, call));
    if (again != keep) return check_.Differed("decided differently");
    return keep;
  }

 private:
  absl::StatusOr<bool> KeepOnce(const Element& element, const UdfCall& call) const {
    return pool_->Run<bool>(
        [&](PythonHelperProcess& helper) { return helper.Keep(element, call.random_key); });
  }

  const std::unique_ptr<HelperPool> pool_;
  const DeterminismCheck check_;
};

template <typename UdfType>
std::function<absl::StatusOr<std::unique_ptr<Udf>>(const Params&)> Factory(
    const PythonUdfOptions& options) {
  return [options](const Params& params) -> absl::StatusOr<std::unique_ptr<Udf>> {
    if (!options.allowed) {
      return absl::PermissionDeniedError(
          "Python UDFs run the client's code on this worker, which it does not allow: start "
          "the worker with --allow_python_udfs (SECURITY.md)");
    }
    ASSIGN_OR_RETURN(PythonUdfConfig config, ReadPythonUdfConfig(params));
    const int64_t check_every = config.determinism_check_every;
    return std::make_unique<UdfType>(std::make_unique<HelperPool>(options, std::move(config)),
                                     check_every);
  };
}

void RegisterOrReplace(UdfRegistry* registry, UdfInfo info) {
  if (registry->Find(info.name) != nullptr) {
    registry->Replace(std::move(info)).IgnoreError();
  } else {
    registry->Register(std::move(info)).IgnoreError();
  }
}

}  // namespace

void RegisterPythonUdfs(UdfRegistry* registry, const PythonUdfOptions& options) {
  UdfInfo map = PythonMapUdfDeclaration();
  map.factory = Factory<PythonMap>(options);
  RegisterOrReplace(registry, std::move(map));
  UdfInfo filter = PythonFilterUdfDeclaration();
  filter.factory = Factory<PythonFilter>(options);
  RegisterOrReplace(registry, std::move(filter));
}

}  // namespace granary
