// Small general-purpose UDFs for text and integer pipelines:
//   non_empty     (predicate) keeps elements whose string tensor `index` is not empty
//   string_length (map)       replaces string tensor `index` by its length (int64)
//   modulo        (predicate) keeps elements whose int64 scalar `index` % modulus == remainder
//   add           (map)       adds `value` to every value of int64 tensor `index`
//   fill_bytes    (map)       replaces the element by one uint8 tensor of `bytes` bytes, each
//                             the low byte of the element's record index (transport benchmarks)
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/spec/udf_declarations.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/core/limits.h"
#include "pipeline/core/udf_tensor_access.h"

namespace granary {
namespace {

class NonEmpty : public Udf {
 public:
  explicit NonEmpty(int64_t index) : index_(index) {}
  absl::StatusOr<bool> Keep(const Element& element, const UdfCall&) const override {
    ASSIGN_OR_RETURN(const Tensor* t, TensorAt(element, index_, DT_STRING, "non_empty"));
    for (const std::string& s : t->strings()) {
      if (!s.empty()) return true;
    }
    return false;
  }

 private:
  const int64_t index_;
};

class StringLength : public Udf {
 public:
  explicit StringLength(int64_t index) : index_(index) {}
  absl::Status Map(Element& element, const UdfCall&) const override {
    ASSIGN_OR_RETURN(Tensor * t, MutableTensorAt(element, index_, DT_STRING, "string_length"));
    Tensor lengths(DT_INT64, t->shape());
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      lengths.data<int64_t>()[i] = static_cast<int64_t>(t->strings()[i].size());
    }
    *t = std::move(lengths);
    return absl::OkStatus();
  }

 private:
  const int64_t index_;
};

class Modulo : public Udf {
 public:
  Modulo(int64_t index, int64_t modulus, int64_t remainder)
      : index_(index), modulus_(modulus), remainder_(remainder) {}
  absl::StatusOr<bool> Keep(const Element& element, const UdfCall&) const override {
    ASSIGN_OR_RETURN(const Tensor* t, TensorAt(element, index_, DT_INT64, "modulo"));
    if (t->num_elements() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("modulo: tensor ", index_, " is ", t->DebugString(), ", need a scalar"));
    }
    int64_t r = t->data<int64_t>()[0] % modulus_;
    if (r < 0) r += modulus_;
    return r == remainder_;
  }

 private:
  const int64_t index_, modulus_, remainder_;
};

class Add : public Udf {
 public:
  Add(int64_t index, int64_t value) : index_(index), value_(value) {}
  absl::Status Map(Element& element, const UdfCall&) const override {
    ASSIGN_OR_RETURN(Tensor * t, MutableTensorAt(element, index_, DT_INT64, "add"));
    for (int64_t i = 0; i < t->num_elements(); ++i) t->data<int64_t>()[i] += value_;
    return absl::OkStatus();
  }

 private:
  const int64_t index_, value_;
};

class FillBytes : public Udf {
 public:
  explicit FillBytes(int64_t bytes) : bytes_(bytes) {}
  absl::Status Map(Element& element, const UdfCall&) const override {
    Tensor t = Tensor::Uninitialized(DT_UINT8, {bytes_});
    std::memset(t.mutable_bytes(), static_cast<int>(element.record & 0xff), bytes_);
    element.tensors.clear();  // Not assign(1, t): that copies the tensor.
    element.tensors.push_back(std::move(t));
    return absl::OkStatus();
  }

 private:
  const int64_t bytes_;
};

// `declaration` with `factory`.
UdfInfo With(UdfInfo declaration,
             std::function<absl::StatusOr<std::unique_ptr<Udf>>(const Params&)> factory) {
  declaration.factory = std::move(factory);
  return declaration;
}

}  // namespace

void RegisterBasicUdfs(UdfRegistry* registry) {
  for (UdfInfo info : {
           With(NonEmptyUdfDeclaration(),
                [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
                  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
                  return std::make_unique<NonEmpty>(index);
                }),
           With(StringLengthUdfDeclaration(),
                [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
                  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
                  return std::make_unique<StringLength>(index);
                }),
           With(ModuloUdfDeclaration(),
                [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
                  ASSIGN_OR_RETURN(const ModuloConfig config, ReadModuloConfig(p));
                  return std::make_unique<Modulo>(config.index, config.modulus, config.remainder);
                }),
           With(AddUdfDeclaration(),
                [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
                  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
                  return std::make_unique<Add>(index, p.GetInt("value"));
                }),
           With(FillBytesUdfDeclaration(),
                [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
                  ASSIGN_OR_RETURN(const int64_t bytes, ReadFillBytesConfig(p));
                  return std::make_unique<FillBytes>(bytes);
                }),
       }) {
    registry->Register(std::move(info)).IgnoreError();
  }
}

}  // namespace granary
