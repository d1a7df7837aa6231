#include "python/status_exceptions.h"

#include <map>
#include <string>

namespace granary::python {
namespace {

namespace py = pybind11;

struct ExceptionKind {
  const char* name;
  PyObject* also;  // a builtin exception it also derives from, or null
};

std::map<absl::StatusCode, ExceptionKind> Kinds() {
  return {
      {absl::StatusCode::kCancelled, {"Cancelled", nullptr}},
      {absl::StatusCode::kUnknown, {"Unknown", nullptr}},
      {absl::StatusCode::kInvalidArgument, {"InvalidArgument", PyExc_ValueError}},
      {absl::StatusCode::kDeadlineExceeded, {"DeadlineExceeded", PyExc_TimeoutError}},
      {absl::StatusCode::kNotFound, {"NotFound", PyExc_LookupError}},
      {absl::StatusCode::kAlreadyExists, {"AlreadyExists", nullptr}},
      {absl::StatusCode::kPermissionDenied, {"PermissionDenied", PyExc_PermissionError}},
      {absl::StatusCode::kResourceExhausted, {"ResourceExhausted", nullptr}},
      {absl::StatusCode::kFailedPrecondition, {"FailedPrecondition", nullptr}},
      {absl::StatusCode::kAborted, {"Aborted", nullptr}},
      {absl::StatusCode::kOutOfRange, {"OutOfRange", nullptr}},
      {absl::StatusCode::kUnimplemented, {"Unimplemented", PyExc_NotImplementedError}},
      {absl::StatusCode::kInternal, {"Internal", nullptr}},
      {absl::StatusCode::kUnavailable, {"Unavailable", PyExc_ConnectionError}},
      {absl::StatusCode::kDataLoss, {"DataLoss", nullptr}},
      {absl::StatusCode::kUnauthenticated, {"Unauthenticated", PyExc_PermissionError}},
  };
}

// The module's exception classes by code, and granary.Error; owned references, kept for the
// interpreter's life (the module is never unloaded).
std::map<absl::StatusCode, PyObject*>* classes = nullptr;
PyObject* base_class = nullptr;

}  // namespace

void RegisterStatusExceptions(py::module_& module) {
  base_class = PyErr_NewExceptionWithDoc(
      "granary.Error", "A Granary call failed; the message is the C++ status message.",
      PyExc_Exception, nullptr);
  module.attr("Error") = py::handle(base_class);
  classes = new std::map<absl::StatusCode, PyObject*>();
  for (const auto& [code, kind] : Kinds()) {
    PyObject* bases =
        kind.also == nullptr ? PyTuple_Pack(1, base_class) : PyTuple_Pack(2, base_class, kind.also);
    const std::string name = std::string("granary.") + kind.name;
    PyObject* cls = PyErr_NewException(name.c_str(), bases, nullptr);
    Py_DECREF(bases);
    (*classes)[code] = cls;
    module.attr(kind.name) = py::handle(cls);
  }
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const StatusError& error) {
      const auto it = classes->find(error.status.code());
      PyObject* cls = it != classes->end() ? it->second : base_class;
      PyErr_SetString(cls, std::string(error.status.message()).c_str());
    }
  });
}

}  // namespace granary::python
