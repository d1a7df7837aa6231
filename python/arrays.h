// Tensors between Granary and NumPy.
//
// A received element's numeric tensors become NumPy arrays that view the bytes the element
// arrived in — the client's receive buffer, or a worker's shared-memory segment — without a
// copy: each array's base is a capsule holding a copy of the ReceivedElement (a reference to
// its bytes), so an array stays valid after the reader moved on, for as long as Python holds
// it. The arrays are writable: the bytes are this process's own (a receive buffer, or a
// shared-memory segment mapped copy-on-write, so writing never reaches the worker — see
// received_element.h). DT_STRING tensors become object arrays of `bytes` (copied: Python's bytes
// own their storage).
#ifndef GRANARY_PYTHON_ARRAYS_H_
#define GRANARY_PYTHON_ARRAYS_H_

#include <vector>

#include "granary/received_element.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "transport/tensor_view.h"

namespace granary::python {

// A capsule holding a copy of `element` (a reference to its bytes): the base of arrays that
// view them.
pybind11::capsule ElementOwner(const ReceivedElement& element);

// The element's tensors as a tuple of NumPy arrays (see above).
pybind11::tuple ElementArrays(const ReceivedElement& element);

// `arrays` — a sequence of NumPy arrays (or what numpy.asarray makes one of): uint8, int32,
// int64, float32, float64 or bool, or object arrays of bytes — as tensor views of their values,
// valid while `keep` lives (it holds the contiguous arrays the views point into). Throws
// StatusError(InvalidArgument) naming the array for any other dtype.
std::vector<TensorView> ArraysAsViews(const pybind11::sequence& arrays,
                                      std::vector<pybind11::array>* keep);

}  // namespace granary::python

#endif  // GRANARY_PYTHON_ARRAYS_H_
