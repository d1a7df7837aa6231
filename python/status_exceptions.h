// Granary's errors in Python: every absl::Status a C++ call returns becomes an exception of the
// `granary` module carrying the C++ message — granary.InvalidArgument (also a ValueError),
// granary.NotFound (also a LookupError), granary.Unavailable, granary.DataLoss, ... — all
// subclasses of granary.Error. Nothing a user passes crashes the interpreter: bad input comes
// back as one of these.
#ifndef GRANARY_PYTHON_STATUS_EXCEPTIONS_H_
#define GRANARY_PYTHON_STATUS_EXCEPTIONS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pybind11/pybind11.h"

namespace granary::python {

// A non-OK status on its way to Python (translated by RegisterStatusExceptions).
struct StatusError {
  absl::Status status;
};

// Defines granary.Error and one subclass per status code in `module`, and translates
// StatusError into them.
void RegisterStatusExceptions(pybind11::module_& module);

// Throws StatusError unless `status` is OK.
inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw StatusError{status};
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return *std::move(value);
}

}  // namespace granary::python

#endif  // GRANARY_PYTHON_STATUS_EXCEPTIONS_H_
