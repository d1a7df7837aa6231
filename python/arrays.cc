#include "python/arrays.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "pybind11/stl.h"
#include "python/status_exceptions.h"

namespace granary::python {

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

// NumPy's type code of a numeric dtype; null for DT_STRING and unknown dtypes.
const char* NumpyFormat(DataType dtype) {
  switch (dtype) {
    case DT_UINT8:
      return "u1";
    case DT_INT32:
      return "<i4";
    case DT_INT64:
      return "<i8";
    case DT_FLOAT:
      return "<f4";
    case DT_DOUBLE:
      return "<f8";
    case DT_BOOL:
      return "?";
    default:
      return nullptr;
  }
}

py::object StringArray(const TensorView& view) {
  py::list values;
  for (absl::string_view s : view.strings) values.append(py::bytes(s.data(), s.size()));
  py::module_ numpy = py::module_::import("numpy");
  py::object array = numpy.attr("empty")(py::int_(view.strings.size()), "dtype"_a = "O");
  for (size_t i = 0; i < view.strings.size(); ++i) array[py::int_(i)] = values[i];
  return array.attr("reshape")(py::tuple(py::cast(view.shape)));
}

}  // namespace

py::capsule ElementOwner(const ReceivedElement& element) {
  return py::capsule(new ReceivedElement(element),
                     [](void* p) { delete static_cast<ReceivedElement*>(p); });
}

py::tuple ElementArrays(const ReceivedElement& element) {
  const py::capsule owner = ElementOwner(element);  // the base of each of its arrays
  py::tuple out(element.tensors().size());
  for (size_t i = 0; i < element.tensors().size(); ++i) {
    const TensorView& view = element.tensor(i);
    if (view.dtype == DT_STRING) {
      out[i] = StringArray(view);
      continue;
    }
    const char* format = NumpyFormat(view.dtype);
    if (format == nullptr) {
      throw StatusError{absl::InvalidArgumentError(
          absl::StrCat("tensor ", i, " has dtype ", DataType_Name(view.dtype),
                       ", which has no NumPy counterpart"))};
    }
    py::array array(py::dtype(format),
                    std::vector<py::ssize_t>(view.shape.begin(), view.shape.end()), view.data,
                    owner);
    out[i] = std::move(array);
  }
  return out;
}

std::vector<TensorView> ArraysAsViews(const py::sequence& arrays, std::vector<py::array>* keep) {
  py::module_ numpy = py::module_::import("numpy");
  std::vector<TensorView> views;
  for (size_t i = 0; i < arrays.size(); ++i) {
    py::array array = numpy.attr("ascontiguousarray")(arrays[i]);
    keep->push_back(array);
    TensorView view;
    view.shape.assign(array.shape(), array.shape() + array.ndim());
    const char kind = array.dtype().kind();
    const py::ssize_t size = array.itemsize();
    if (kind == 'O') {
      view.dtype = DT_STRING;
      py::array flat = array.attr("reshape")(-1);
      keep->push_back(flat);
      for (py::handle item : flat) {
        if (!py::isinstance<py::bytes>(item)) {
          throw StatusError{absl::InvalidArgumentError(
              absl::StrCat("array ", i, ": an object array must hold bytes, not ",
                           std::string(py::str(item.get_type().attr("__name__")))))};
        }
        char* data = nullptr;
        py::ssize_t length = 0;
        PyBytes_AsStringAndSize(item.ptr(), &data, &length);
        view.strings.emplace_back(data, static_cast<size_t>(length));
      }
    } else {
      if (kind == 'u' && size == 1) {
        view.dtype = DT_UINT8;
      } else if (kind == 'i' && size == 4) {
        view.dtype = DT_INT32;
      } else if (kind == 'i' && size == 8) {
        view.dtype = DT_INT64;
      } else if (kind == 'f' && size == 4) {
        view.dtype = DT_FLOAT;
      } else if (kind == 'f' && size == 8) {
        view.dtype = DT_DOUBLE;
      } else if (kind == 'b') {
        view.dtype = DT_BOOL;
      } else {
        throw StatusError{absl::InvalidArgumentError(
            absl::StrCat("array ", i, " has dtype ", std::string(py::str(array.dtype())),
                         "; Granary's are uint8, int32, int64, float32, float64, bool and bytes "
                         "(object arrays)"))};
      }
      view.data = static_cast<const char*>(array.data());
      view.size = static_cast<size_t>(array.nbytes());
    }
    views.push_back(std::move(view));
  }
  return views;
}

}  // namespace granary::python
