// Python UDFs: `python` (map, parallel_map) and `python_filter` (filter) run a Python function
// that a client shipped inside the pipeline (its cloudpickle, granary.Dataset.map(fn)) in helper
// processes — one per concurrent call, started when first needed and kept for the next calls —
// each the Python interpreter running one function (python_helper_process.h): parallel_map's
// threads do not share a GIL, and a function that crashes its process fails its call, not the
// worker. The function gets the element's tensors as NumPy arrays (viewing shared memory, not
// copied; DT_STRING scalars as bytes) and, when it has a parameter named `rng`, a
// numpy.random.Generator (Philox) keyed by the element's stateless random key; it returns an
// array, bytes, or a tuple of them (the new element), or — for python_filter — whether to keep
// the element.
//
// Exactly once rests on recomputation giving identical bytes: the function must be
// deterministic given its arguments and `rng` (docs/python.md). A cheap check catches most that
// are not: the first call of each UDF instance and one in determinism_check_every (default 1000)
// are made twice — on whichever helpers are idle — and results that differ are
// FailedPrecondition saying so (not skipped by ignore_errors: the function is wrong, not the
// element).
//
// Errors, per call: the function raising is InvalidArgument with its traceback (ignore_errors
// skips the element); a call longer than timeout_ms kills its helper and is DeadlineExceeded; a
// helper that dies during a call is replaced and the element computed again, once — dying again
// is Internal.
//
// Running a client's Python is code execution on the worker: it is off unless the process
// allows it (PythonUdfOptions.allowed, a worker's --allow_python_udfs); SECURITY.md.
#ifndef GRANARY_PIPELINE_UDFS_UDF_PYTHON_H_
#define GRANARY_PIPELINE_UDFS_UDF_PYTHON_H_

#include <string>

#include "pipeline/core/udf.h"

namespace granary {

struct PythonUdfOptions {
  // Whether Python UDFs run in this process. When false, building one is PermissionDenied
  // naming the worker flag that allows them.
  bool allowed = false;
  // The interpreter the helpers run (with NumPy, and the modules the functions import).
  std::string interpreter = "/usr/bin/python3";
};

// Registers python and python_filter with `options`, or — when they are registered already —
// puts them in place of the registered ones.
void RegisterPythonUdfs(UdfRegistry* registry, const PythonUdfOptions& options);

}  // namespace granary

#endif  // GRANARY_PIPELINE_UDFS_UDF_PYTHON_H_
