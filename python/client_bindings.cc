// granary._granary's client side: the C++ client library (client/include/granary/client.h) for
// Python — Client, Job and EpochReader, whose elements come out as NumPy arrays viewing the
// received bytes (arrays.h). Every call that may wait on the network releases the GIL.
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/position.h"
#include "granary/client.h"
#include "granary/client_config.h"
#include "pipeline/digests/epoch_digest.h"
#include "pybind11/stl.h"
#include "python/arrays.h"
#include "python/bindings.h"
#include "python/status_exceptions.h"

namespace granary::python {

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

JobCachePolicy ParseJobCachePolicy(const std::string& name) {
  if (name == "compute") return JobCachePolicy::kCompute;
  if (name == "full") return JobCachePolicy::kFull;
  if (name == "at_mark") return JobCachePolicy::kAtMark;
  if (name == "auto") return JobCachePolicy::kAuto;
  throw StatusError{absl::InvalidArgumentError(
      absl::StrCat("cache_policy '", name, "' is none of compute, full, at_mark, auto"))};
}

JobCompression ParseJobCompression(const std::string& name) {
  if (name == "none") return JobCompression::kNone;
  if (name == "lz4") return JobCompression::kLz4;
  if (name == "zstd") return JobCompression::kZstd;
  throw StatusError{absl::InvalidArgumentError(
      absl::StrCat("compression '", name, "' is none of none, lz4, zstd"))};
}

JobSharding ParseJobSharding(const std::string& name) {
  if (name == "auto") return JobSharding::kAuto;
  if (name == "dynamic") return JobSharding::kDynamic;
  if (name == "equal") return JobSharding::kEqual;
  throw StatusError{absl::InvalidArgumentError(
      absl::StrCat("sharding '", name, "' is none of auto, dynamic, equal"))};
}

JobRemainder ParseJobRemainder(const std::string& name) {
  if (name == "pad") return JobRemainder::kPad;
  if (name == "drop") return JobRemainder::kDrop;
  if (name == "uneven") return JobRemainder::kUneven;
  throw StatusError{absl::InvalidArgumentError(
      absl::StrCat("remainder '", name, "' is none of pad, drop, uneven"))};
}

// One received element: its tensors as arrays, and its wire image (for checking that the
// arrays view it).
class PyElement {
 public:
  explicit PyElement(ReceivedElement element) : element_(std::move(element)) {}
  py::tuple arrays() const { return ElementArrays(element_); }
  py::array wire_image() const {
    py::array image(py::dtype("u1"), {static_cast<py::ssize_t>(element_.bytes().size())},
                    element_.bytes().data(), ElementOwner(element_));
    image.attr("setflags")("write"_a = false);
    return image;
  }
  uint64_t split_id() const { return element_.split_id(); }
  int64_t record() const { return element_.record(); }
  bool padding() const { return element_.padding(); }

 private:
  ReceivedElement element_;
};

class PyEpochReader {
 public:
  PyEpochReader(std::unique_ptr<EpochReader> reader, std::optional<bool> digest_batched)
      : reader_(std::move(reader)) {
    if (digest_batched.has_value()) {
      digest_.emplace(*digest_batched);
      dropped_digest_ = std::make_shared<EpochDigest>(*digest_batched);
      // Called from Next(), under mu_ (held by NextReceived).
      reader_->SetDropObserver([dropped = dropped_digest_](const ReceivedElement& element) {
        dropped->Add(element.tensors());
      });
    }
  }

  // The next element, or nullopt at the epoch's end.
  std::optional<ReceivedElement> NextReceived() {
    std::lock_guard<std::mutex> lock(mu_);
    ReceivedElement element;
    bool end = false;
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = reader_->Next(&element, &end);
    }
    ThrowIfError(status);
    if (end) return std::nullopt;
    last_padding_ = element.padding();
    // The digest is of the epoch's data: padding repeats an element already counted.
    if (digest_.has_value() && !element.padding()) digest_->Add(element.tensors());
    return element;
  }

  py::tuple Next() {
    std::optional<ReceivedElement> element = NextReceived();
    if (!element.has_value()) throw py::stop_iteration();
    return ElementArrays(*element);
  }

  std::optional<PyElement> NextElement() {
    std::optional<ReceivedElement> element = NextReceived();
    if (!element.has_value()) return std::nullopt;
    return PyElement(*std::move(element));
  }

  py::bytes Position() {
    std::lock_guard<std::mutex> lock(mu_);
    return py::bytes(reader_->SavePosition());
  }

  py::dict Stats() {
    const EpochStats s = reader_->stats();
    return py::dict("elements"_a = s.elements, "payload_bytes"_a = s.payload_bytes,
                    "wait_us"_a = s.wait_us, "duplicates_dropped"_a = s.duplicates_dropped,
                    "recomputed_dropped"_a = s.recomputed_dropped, "retries"_a = s.retries,
                    "checksum_mismatches"_a = s.checksum_mismatches,
                    "shared_memory_elements"_a = s.shared_memory_elements,
                    "trainer_tail_elements"_a = s.trainer_tail_elements,
                    "remainder_dropped"_a = s.remainder_dropped, "padding"_a = s.padding);
  }

  bool last_padding() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_padding_;
  }

  py::object Digest() const {
    if (!digest_.has_value()) return py::none();
    return py::dict("rows"_a = digest_->rows(), "multiset"_a = digest_->multiset(),
                    "ordered"_a = digest_->ordered(), "dropped_rows"_a = dropped_digest_->rows(),
                    "dropped_multiset"_a = dropped_digest_->multiset());
  }

 private:
  std::mutex mu_;  // EpochReader is thread-compatible; Python threads may share a reader
  std::unique_ptr<EpochReader> reader_;
  std::optional<EpochDigest> digest_;
  // What the remainder rule drop left out (equal shares), with the digest.
  std::shared_ptr<EpochDigest> dropped_digest_;
  bool last_padding_ = false;
};

class PyJob {
 public:
  explicit PyJob(std::shared_ptr<Job> job) : job_(std::move(job)) {}
  int64_t job_id() const { return job_->job_id(); }
  int32_t Scale(int32_t num_worker_slots, const std::string& reason, int32_t num_local_slots) {
    absl::StatusOr<int32_t> running;
    {
      py::gil_scoped_release release;
      running = job_->Scale(num_worker_slots, reason, num_local_slots);
    }
    return ValueOrThrow(std::move(running));
  }
  std::unique_ptr<PyEpochReader> ReadEpoch(int64_t epoch, int32_t consumer,
                                           const py::bytes& position,
                                           std::optional<bool> digest_batched) {
    const std::string saved = position;
    absl::StatusOr<std::unique_ptr<EpochReader>> reader;
    {
      py::gil_scoped_release release;
      reader = job_->ReadEpoch(epoch, consumer, saved);
    }
    return std::make_unique<PyEpochReader>(ValueOrThrow(std::move(reader)), digest_batched);
  }

 private:
  std::shared_ptr<Job> job_;
};

class PyClient {
 public:
  explicit PyClient(const ClientOptions& options) {
    absl::StatusOr<std::unique_ptr<Client>> client;
    {
      py::gil_scoped_release release;
      client = Client::Connect(options);
    }
    client_ = ValueOrThrow(std::move(client));
  }

  std::string Register(const py::bytes& serialized) {
    PipelineDef def;
    if (!def.ParseFromString(std::string(serialized))) {
      throw StatusError{absl::InvalidArgumentError("not a serialized PipelineDef")};
    }
    py::gil_scoped_release release;
    return ValueOrThrow(client_->RegisterPipeline(def));
  }

  PyJob OpenJob(const std::string& dataset_id, const JobSpec& spec) {
    absl::StatusOr<std::unique_ptr<Job>> job;
    {
      py::gil_scoped_release release;
      job = client_->OpenJob(dataset_id, spec);
    }
    return PyJob(ValueOrThrow(std::move(job)));
  }

 private:
  std::shared_ptr<Client> client_;
};

}  // namespace

void RegisterClientBindings(py::module_& m) {
  m.def(
      "check_position",
      [](const py::bytes& position, int64_t epoch, int32_t consumer) {
        const std::string blob = position;
        // Of whichever job it names: the job is checked when a reader resumes from it.
        const ClientPosition parsed = ValueOrThrow(ParsePosition(blob));
        ValueOrThrow(DecodePosition(blob, parsed.job_id(), epoch, consumer));
      },
      "position"_a, "epoch"_a, "consumer"_a,
      "Raises InvalidArgument unless `position` is an EpochReader.position() of epoch `epoch` "
      "and consumer `consumer` (of any job), naming what is wrong.");
  py::class_<PyElement>(m, "Element", "One element as the trainer received it.")
      .def("arrays", &PyElement::arrays,
           "Its tensors as a tuple of NumPy arrays viewing the received bytes (writable: "
           "writes stay in this process).")
      .def("wire_image", &PyElement::wire_image,
           "The bytes it arrived in (transport/FORMAT.md), as a read-only uint8 array.")
      .def_property_readonly("split_id", &PyElement::split_id)
      .def_property_readonly("record", &PyElement::record)
      .def_property_readonly("padding", &PyElement::padding,
                             "Equal shares, remainder pad: a copy of an element this consumer "
                             "already delivered, so that every consumer takes as many steps.");

  py::class_<PyEpochReader>(m, "EpochReader",
                            "Reads one epoch for one consumer; iterating yields each element's "
                            "tensors as a tuple of NumPy arrays.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &PyEpochReader::Next)
      .def("next_element", &PyEpochReader::NextElement,
           "The next element as an Element, or None at the epoch's end.")
      .def("position", &PyEpochReader::Position,
           "Where the reader stands (bytes): per task, the next element not yet delivered. "
           "Job.read_epoch(..., position=p) resumes exactly there.")
      .def_property_readonly("stats", &PyEpochReader::Stats)
      .def_property_readonly("last_padding", &PyEpochReader::last_padding,
                             "Whether the element returned last is padding (equal shares, "
                             "remainder pad): a copy a trainer may mask.")
      .def_property_readonly("digest", &PyEpochReader::Digest,
                             "The digest of what the reader delivered (rows, multiset, "
                             "ordered; padding left out) and of what it dropped (dropped_rows, "
                             "dropped_multiset), if it was opened with digest_batched; else "
                             "None.");

  py::class_<PyJob>(m, "Job")
      .def_property_readonly("job_id", &PyJob::job_id)
      .def("scale", &PyJob::Scale, "num_worker_slots"_a, "reason"_a = "", "num_local_slots"_a = -1,
           "Sets the job's remote tasks per consumer (and its local ones, if num_local_slots >= "
           "0), for its running epoch too (tasks join or are shed mid-epoch, exactly once "
           "throughout). Returns the running epoch's tasks per consumer after the step.")
      .def("read_epoch", &PyJob::ReadEpoch, "epoch"_a, "consumer"_a = 0, "position"_a = py::bytes(),
           "digest_batched"_a = py::none(),
           "Starts (idempotently) and reads epoch `epoch` as `consumer`, from `position` if "
           "given. With digest_batched (whether elements are batches) the reader digests what "
           "it delivers.");

  py::class_<PyClient>(m, "Client")
      .def(py::init([](const std::string& address, const std::string& tls_ca,
                       const std::string& tls_cert, const std::string& tls_key,
                       const std::string& token, bool insecure, bool shared_memory,
                       int stall_timeout_ms, int rpc_timeout_ms,
                       std::vector<std::string> local_worker_flags, const std::string& config) {
             ClientOptions options;
             options.option_naming = ClientOptionNaming::kPythonKeywords;
             options.dispatcher_address = address;
             options.tls_ca_file = tls_ca;
             options.tls_cert_file = tls_cert;
             options.tls_key_file = tls_key;
             options.bearer_token = token;
             options.insecure = insecure;
             options.shared_memory = shared_memory;
             options.stall_timeout_ms = stall_timeout_ms;
             options.rpc_timeout_ms = rpc_timeout_ms;
             options.local_worker_flags = std::move(local_worker_flags);
             // The file gives what the keywords leave unset.
             if (!config.empty()) ThrowIfError(ApplyClientConfigFile(config, &options));
             return std::make_unique<PyClient>(options);
           }),
           "address"_a, "tls_ca"_a = "", "tls_cert"_a = "", "tls_key"_a = "", "token"_a = "",
           "insecure"_a = false, "shared_memory"_a = true, "stall_timeout_ms"_a = 60000,
           "rpc_timeout_ms"_a = 10000, "local_worker_flags"_a = std::vector<std::string>(),
           "config"_a = "")
      .def("register_pipeline", &PyClient::Register, "def"_a,
           "Registers a serialized PipelineDef; returns its dataset id.")
      .def(
          "open_job",
          [](PyClient& client, const std::string& dataset_id, const std::string& name,
             uint64_t seed, int32_t num_consumers, int32_t num_worker_slots, int64_t num_epochs,
             const std::string& cache_policy, const std::string& compression,
             std::vector<std::string> readers, const std::string& autoscale, int32_t local_workers,
             const std::string& placement, const std::string& owner, const std::string& sharding,
             const std::string& remainder, int64_t resume_epoch,
             const std::vector<py::bytes>& resume_positions, bool takeover, bool auto_order,
             const std::string& tail) {
            JobSpec spec;
            spec.name = name;
            spec.owner = owner;
            spec.seed = seed;
            spec.num_consumers = num_consumers;
            spec.num_worker_slots = num_worker_slots;
            spec.num_epochs = num_epochs;
            spec.cache_policy = ParseJobCachePolicy(cache_policy);
            spec.compression = ParseJobCompression(compression);
            spec.readers = std::move(readers);
            if (autoscale == "cachew") {
              spec.autoscale = JobAutoscale::kCachew;
            } else if (autoscale == "model") {
              spec.autoscale = JobAutoscale::kModel;
            } else if (autoscale != "none") {
              throw StatusError{absl::InvalidArgumentError(
                  absl::StrCat("autoscale '", autoscale, "' is none of none, cachew, model"))};
            }
            spec.local_workers = local_workers;
            if (placement == "pecan") {
              spec.placement = JobPlacement::kPecan;
            } else if (placement == "auto") {
              spec.placement = JobPlacement::kAuto;
            } else if (placement != "static") {
              throw StatusError{absl::InvalidArgumentError(
                  absl::StrCat("placement '", placement, "' is none of static, pecan, auto"))};
            }
            spec.sharding = ParseJobSharding(sharding);
            spec.remainder = ParseJobRemainder(remainder);
            spec.resume_epoch = resume_epoch;
            for (const py::bytes& position : resume_positions) {
              spec.resume_positions.push_back(position);
            }
            spec.takeover = takeover;
            spec.auto_order = auto_order;
            absl::StatusOr<JobTail> job_tail = JobTailFromName(tail);
            if (!job_tail.ok()) throw StatusError{job_tail.status()};
            spec.tail = *job_tail;
            return client.OpenJob(dataset_id, spec);
          },
          "dataset_id"_a, "name"_a = "", "seed"_a = 0, "num_consumers"_a = 1,
          "num_worker_slots"_a = 0, "num_epochs"_a = 0, "cache_policy"_a = "compute",
          "compression"_a = "none", "readers"_a = std::vector<std::string>(),
          "autoscale"_a = "none", "local_workers"_a = 0, "placement"_a = "static", "owner"_a = "",
          "sharding"_a = "auto", "remainder"_a = "pad", "resume_epoch"_a = 0,
          "resume_positions"_a = std::vector<py::bytes>(), "takeover"_a = false,
          "auto_order"_a = false, "tail"_a = "auto");
}

}  // namespace granary::python
