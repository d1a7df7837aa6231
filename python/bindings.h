// The parts of the granary._granary extension module (module.cc registers each).
#ifndef GRANARY_PYTHON_BINDINGS_H_
#define GRANARY_PYTHON_BINDINGS_H_

#include "pybind11/pybind11.h"

namespace granary::python {

// Pipeline definitions, validation, local epochs and digests (pipeline_bindings.cc).
void RegisterPipelineBindings(pybind11::module_& m);
// The client library: Client, Job, EpochReader (client_bindings.cc).
void RegisterClientBindings(pybind11::module_& m);

}  // namespace granary::python

#endif  // GRANARY_PYTHON_BINDINGS_H_
