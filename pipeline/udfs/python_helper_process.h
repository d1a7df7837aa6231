// PythonHelperProcess: one helper process that runs one Python function on elements — a Python
// UDF's call slot (pipeline/udfs/udf_python.h). The process is the Python interpreter running
// python_udf_helper.py (embedded in this library), so a function runs in its own interpreter,
// holding no GIL but its own, and a function that crashes its process fails one call, not the
// worker.
//
// The protocol. The two share a segment (a memfd, the helper's descriptor 3) and talk over the
// helper's stdin (requests, a Unix socket) and stdout (answers, a pipe), a line each:
//   load SIZE LEN               the function's pickle is segment[0, LEN)   -> ok | error
//   map SIZE END KEY TENSORS    the element's tensors, in segment[0, END)  -> out TENSORS |
//                                                                             grow N | error
//   keep SIZE END KEY TENSORS   as map, for a predicate                    -> keep 0|1 | error
//   resume SIZE                 after `grow N`: the segment has grown to SIZE -> out TENSORS |
//                                                                             error
// SIZE is the segment's size now (the helper maps it again when it changed); KEY is the
// element's stateless random key (the function's `rng` draws from it). TENSORS describes the
// tensors in the segment: their count, then for each `DTYPE OFFSET RANK DIM...` (DataType's
// numbers). A numeric tensor's values are at OFFSET, row-major; a DT_STRING tensor's are its
// values' lengths (int64, little-endian) followed by their bytes. Every tensor starts 64-byte
// aligned. The result's tensors are written from END on (rounded up to 64); when they do not
// fit, `grow N` asks for a segment of N bytes. `error N` is followed by N bytes: the Python
// traceback. The helper views the input's numeric tensors in place (no copy) and does no
// per-byte work in Python: the worker frames and unframes.
//
// The helper exits when its stdin closes (this object is destroyed) or when its parent process
// is gone (it checks every second), so no helper outlives its worker.
//
// Thread-compatible: one call at a time (the UDF keeps a pool of these for concurrent calls).
#ifndef GRANARY_PIPELINE_UDFS_PYTHON_HELPER_PROCESS_H_
#define GRANARY_PIPELINE_UDFS_PYTHON_HELPER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "pipeline/core/element.h"

namespace granary {

class PythonHelperProcess {
 public:
  // Starts `interpreter` running the helper and loads `function` (a pickle) into it.
  // Errors: Unavailable naming the interpreter when it cannot be started (or exits at once, e.g.
  // without NumPy: its stderr says why); InvalidArgument with the traceback when the function
  // does not load there.
  static absl::StatusOr<std::unique_ptr<PythonHelperProcess>> Start(
      const std::string& interpreter, absl::string_view function, absl::Duration call_timeout);
  // Ends the helper (stdin closed, then SIGKILL if it lingers) and reaps it.
  ~PythonHelperProcess();
  PythonHelperProcess(const PythonHelperProcess&) = delete;
  PythonHelperProcess& operator=(const PythonHelperProcess&) = delete;

  // Calls the function on `element` (its tensors as arguments) with the stateless random key
  // `random_key`; what it returns replaces the element's tensors (provenance kept).
  // Errors: InvalidArgument with the traceback when the function raised (or returned what an
  // element cannot hold); DeadlineExceeded when it did not return within the call timeout (the
  // helper is then killed); Unavailable when the helper died during the call (alive() is then
  // false: start another).
  absl::Status Map(Element& element, uint64_t random_key);
  // As Map, for a predicate: whether the function's result is true.
  absl::StatusOr<bool> Keep(const Element& element, uint64_t random_key);

  // False once the helper has died or been killed.
  bool alive() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

 private:
  PythonHelperProcess() = default;
  // Makes the segment at least `size` bytes (and mapped).
  absl::Status Grow(size_t size);
  // Lays `tensors` out in the segment from offset 0, as the protocol says; their description
  // (TENSORS) and, in `end`, the end of what was written.
  absl::StatusOr<std::string> WriteTensors(const std::vector<Tensor>& tensors, size_t* end);
  // The tensors `words` (TENSORS of `answer`) describe, copied out of the segment (into the
  // row's place in its batch inside a ScopedRowDestinations). Internal naming the answer when
  // it is malformed or points outside the segment.
  absl::StatusOr<std::vector<Tensor>> ReadTensors(absl::string_view answer,
                                                  absl::Span<const absl::string_view> words) const;
  // Writes `element`'s tensors into the segment and sends `command SIZE END KEY TENSORS`; the
  // answer line (after any `grow`).
  absl::StatusOr<std::string> Call(absl::string_view command, const Element& element,
                                   uint64_t random_key);
  // Sends `line` and reads one answer line before the deadline; an `error` answer becomes
  // InvalidArgument with its text.
  absl::StatusOr<std::string> Exchange(const std::string& line, absl::Time deadline);
  // Reads up to and including '\n' (or exactly `n` bytes when n > 0) before the deadline.
  absl::StatusOr<std::string> Read(size_t n, absl::Time deadline);
  // Kills and reaps the helper; the error to report, naming `why` and how it ended.
  absl::Status Died(absl::StatusCode code, absl::string_view why);

  std::string interpreter_;
  absl::Duration call_timeout_;
  pid_t pid_ = -1;
  int requests_fd_ = -1;  // the helper's stdin
  int answers_fd_ = -1;   // the helper's stdout
  int segment_fd_ = -1;
  char* segment_ = nullptr;
  size_t segment_size_ = 0;
  std::string buffered_;  // read from answers_fd_ beyond the last line
};

// The helper's Python source (python_udf_helper.py).
extern const std::string_view kPythonUdfHelperSource;

}  // namespace granary

#endif  // GRANARY_PIPELINE_UDFS_PYTHON_HELPER_PROCESS_H_
