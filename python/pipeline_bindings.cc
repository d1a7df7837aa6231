// granary._granary's in-process side: pipeline definitions (JSON and serialized PipelineDef),
// validation against the UDF registry, local epochs (what `granary local` runs) and epoch
// digests. The Python package (granary/dataset.py, granary/__init__.py) builds on these.
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/cache_policy.h"
#include "common/deterministic_serialization.h"
#include "common/env.h"
#include "google/protobuf/util/json_util.h"
#include "pipeline/core/element.h"
#include "pipeline/digests/epoch_digest.h"
#include "pipeline/local_runner.h"
#include "pipeline/optimizer/auto_order.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "pipeline/udfs/udf_python.h"
#include "pipeline/core/udf.h"
#include "python/arrays.h"
#include "python/bindings.h"
#include "python/status_exceptions.h"

namespace granary::python {

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

// The sources, ops and UDFs local runs and validation know: the built-ins and the UDFs of every
// plugin loaded, with Python UDFs allowed — this process runs its own functions — in helpers
// running this interpreter. First called holding the GIL (from a binding).
PipelineRegistries& Registries() {
  static auto* registries = [] {
    auto* made = new PipelineRegistries(PipelineRegistries::WithBuiltins());
    RegisterPythonUdfs(&made->udfs,
                       PythonUdfOptions{.allowed = true,
                                        .interpreter = py::module_::import("sys")
                                                           .attr("executable")
                                                           .cast<std::string>()});
    return made;
  }();
  return *registries;
}
std::mutex registry_mu;

PipelineDef ParseDef(const py::bytes& serialized) {
  PipelineDef def;
  if (!def.ParseFromString(std::string(serialized))) {
    throw StatusError{absl::InvalidArgumentError("not a serialized PipelineDef")};
  }
  return def;
}

py::bytes Serialize(const PipelineDef& def) { return py::bytes(SerializeDeterministically(def)); }

std::unique_ptr<Pipeline> CreatePipeline(const PipelineDef& def) {
  std::lock_guard<std::mutex> lock(registry_mu);
  return ValueOrThrow(Pipeline::Create(def, Registries()));
}

// One in-process epoch, pulled element by element.
class LocalEpoch {
 public:
  LocalEpoch(const py::bytes& def, uint64_t seed, int64_t epoch, const std::string& cache_policy)
      : pipeline_(CreatePipeline(ParseDef(def))) {
    const std::optional<int> pinned = ValueOrThrow(
        PinnedPrefixOps(pipeline_->def(), ValueOrThrow(ParseCachePolicy(cache_policy))));
    py::gil_scoped_release release;
    iterator_ =
        ValueOrThrow(MakeEpochIterator(*pipeline_, seed, epoch, Env::Default(), pinned, &stats_));
  }

  py::tuple Next() {
    Element element;
    bool end = false;
    BufferRef image;
    {
      py::gil_scoped_release release;
      absl::Status status = iterator_->GetNext(&element, &end);
      if (status.ok() && !end) {
        // The element's wire image (a batch is one already): what a trainer of the service
        // receives, viewed the same way.
        absl::StatusOr<BufferRef> serialized = element.Serialize(BufferPool::Default());
        status = serialized.status();
        if (status.ok()) image = *std::move(serialized);
      }
      ThrowIfError(status);
    }
    if (end) throw py::stop_iteration();
    return ElementArrays(ValueOrThrow(ReceivedElement::View(image, image->bytes())));
  }

  int64_t skipped() const { return stats_.skipped_elements.load(); }

 private:
  std::unique_ptr<Pipeline> pipeline_;
  IteratorStats stats_;
  std::unique_ptr<Iterator> iterator_;
};

class Digest {
 public:
  explicit Digest(bool batched) : digest_(batched) {}
  void Add(const py::sequence& arrays) {
    std::vector<py::array> keep;
    digest_.Add(ArraysAsViews(arrays, &keep));
  }
  const EpochDigest& digest() const { return digest_; }

 private:
  EpochDigest digest_;
};

}  // namespace

void RegisterPipelineBindings(py::module_& m) {
  m.def(
      "parse_pipeline_json",
      [](const std::string& text, const std::string& origin) {
        return Serialize(ValueOrThrow(ParsePipelineJson(text, origin)));
      },
      "text"_a, "origin"_a = "pipeline",
      "A pipeline's JSON (protobuf's JSON mapping of PipelineDef, ${NAME} placeholders expanded) "
      "as a serialized PipelineDef (deterministic bytes).");
  m.def(
      "load_pipeline_file",
      [](const std::string& path) {
        return Serialize(ValueOrThrow(LoadPipelineFile(Env::Default(), path)));
      },
      "path"_a, "The pipeline file at `path` as a serialized PipelineDef.");
  m.def(
      "pipeline_to_json",
      [](const py::bytes& def) {
        std::string json;
        google::protobuf::util::JsonPrintOptions options;
        options.add_whitespace = true;
        const auto status =
            google::protobuf::util::MessageToJsonString(ParseDef(def), &json, options);
        if (!status.ok()) {
          throw StatusError{absl::InternalError(
              absl::StrCat("PipelineDef to JSON: ",
                           std::string(status.message().data(), status.message().size())))};
        }
        return json;
      },
      "def"_a, "A serialized PipelineDef as JSON.");
  m.def(
      "validate_pipeline",
      [](const py::bytes& def) {
        const std::unique_ptr<Pipeline> pipeline = CreatePipeline(ParseDef(def));
        return pipeline->batched();
      },
      "def"_a,
      "Checks a serialized PipelineDef as the service does when it is registered (ops, params, "
      "UDFs, limits; not its files): raises granary.InvalidArgument naming the culprit. Returns "
      "whether its elements are batches.");
  m.def(
      "load_plugin",
      [](const std::string& path) {
        std::lock_guard<std::mutex> lock(registry_mu);
        ThrowIfError(LoadUdfPlugin(path, &Registries().udfs));
      },
      "path"_a,
      "Loads a UDF plugin (a shared library exporting GranaryRegisterUdfs) for local runs and "
      "validation in this process; workers load theirs with --plugin.");
  m.def(
      "auto_order",
      [](const py::bytes& def) {
        const PipelineDef parsed = ParseDef(def);
        // Built once only to be validated: a bad pipeline raises the error local() raises,
        // not one from inside AutoOrder's profile.
        CreatePipeline(parsed);
        PipelineDef reordered;
        {
          py::gil_scoped_release release;
          std::lock_guard<std::mutex> lock(registry_mu);
          reordered = ValueOrThrow(AutoOrder(parsed, Registries(), Env::Default()));
        }
        return py::make_tuple(Serialize(reordered), DescribeOrder(reordered));
      },
      "def"_a,
      "A serialized PipelineDef reordered by AutoOrder (pipeline/optimizer/auto_order.h: map ops "
      "swapped where no output byte changes, those that shrink an element first), as a worker "
      "of a job opened with auto_order=True runs it, profiled on its first split in this "
      "process; and the order, e.g. 'parse_example decode_jpeg random_crop(op 4) normalize(op "
      "3) batch'.");
  m.def(
      "local_digest_line",
      [](const py::bytes& def, uint64_t seed, int64_t epoch, const std::string& cache_policy) {
        const std::unique_ptr<Pipeline> pipeline = CreatePipeline(ParseDef(def));
        EpochRunOptions options;
        options.pinned_prefix_ops = ValueOrThrow(
            PinnedPrefixOps(pipeline->def(), ValueOrThrow(ParseCachePolicy(cache_policy))));
        py::gil_scoped_release release;
        return ValueOrThrow(RunEpochInProcess(*pipeline, seed, epoch, Env::Default(), options))
            .digest_line;
      },
      "def"_a, "seed"_a, "epoch"_a, "cache_policy"_a = "compute",
      "The digest line `granary local --digest_out` writes for this epoch (JSON).");

  py::class_<LocalEpoch>(m, "LocalEpoch",
                         "One epoch run in this process; iterating yields each element's tensors "
                         "as a tuple of NumPy arrays.")
      .def(py::init<const py::bytes&, uint64_t, int64_t, const std::string&>(), "def"_a, "seed"_a,
           "epoch"_a, "cache_policy"_a = "compute")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &LocalEpoch::Next)
      .def_property_readonly("skipped", &LocalEpoch::skipped);

  py::class_<Digest>(m, "Digest",
                     "An epoch's exactly-once fingerprint (pipeline/digests/epoch_digest.h) over the "
                     "elements added: rows, an order-independent multiset digest (the wrapping "
                     "sum of row hashes, so shares add up) and an ordered one.")
      .def(py::init<bool>(), "batched"_a)
      .def("add", &Digest::Add, "arrays"_a,
           "Adds one element, given as its tensors (NumPy arrays).")
      .def_property_readonly("rows", [](const Digest& d) { return d.digest().rows(); })
      .def_property_readonly("multiset", [](const Digest& d) { return d.digest().multiset(); })
      .def_property_readonly("ordered", [](const Digest& d) { return d.digest().ordered(); });
}

}  // namespace granary::python
