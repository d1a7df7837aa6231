// granary._granary: the C++ side of the `granary` Python package (python/granary/).
#include "pybind11/pybind11.h"
#include "python/bindings.h"
#include "python/status_exceptions.h"

PYBIND11_MODULE(_granary, m) {
  m.doc() = "Granary's C++ client library and in-process pipelines (use the `granary` package).";
  granary::python::RegisterStatusExceptions(m);
  granary::python::RegisterPipelineBindings(m);
  granary::python::RegisterClientBindings(m);
}
