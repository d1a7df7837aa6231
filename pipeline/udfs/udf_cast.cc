// cast: converts the numeric tensor at `index` (any shape) to `dtype` (uint8, int32, int64,
// float32, float64 or bool), keeping its shape. params: index (default 0), dtype (required).
//
// Conversions, all deterministic:
//   integer -> integer: two's-complement wrap-around (as static_cast);
//   float   -> integer: truncation toward zero, saturating at the target's range, NaN -> 0;
//   any     -> float:   nearest representable value;
//   any     -> bool:    x != 0;  bool -> any: 0 or 1.
// Casting to the tensor's own dtype is a no-op. String tensors are rejected.
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/spec/udf_declarations.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/core/udf_tensor_access.h"

namespace granary {
namespace {

constexpr char kName[] = "cast";

template <typename To, typename From>
To Convert(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From{0};
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(x)) return 0;
    // Compare in From: the limits of To convert exactly enough for a saturating bound (the
    // largest int64 rounds up to 2^63, which is then correctly treated as out of range).
    if (x <= static_cast<From>(std::numeric_limits<To>::min())) {
      return std::numeric_limits<To>::min();
    }
    if (x >= static_cast<From>(std::numeric_limits<To>::max())) {
      return std::numeric_limits<To>::max();
    }
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

template <typename To, typename From>
void ConvertAll(const Tensor& in, Tensor* out) {
  const int64_t n = in.num_elements();
  To* dst = out->data<To>();
  if constexpr (std::is_same_v<From, bool>) {
    // Read bools as bytes: any non-zero byte counts as true.
    const uint8_t* src = reinterpret_cast<const uint8_t*>(in.content().data());
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<To>(src[i] != 0);
  } else {
    const From* src = in.data<From>();
    for (int64_t i = 0; i < n; ++i) dst[i] = Convert<To>(src[i]);
  }
}

template <typename To>
void ConvertFrom(const Tensor& in, Tensor* out) {
  switch (in.dtype()) {
    case DT_UINT8:
      return ConvertAll<To, uint8_t>(in, out);
    case DT_INT32:
      return ConvertAll<To, int32_t>(in, out);
    case DT_INT64:
      return ConvertAll<To, int64_t>(in, out);
    case DT_FLOAT:
      return ConvertAll<To, float>(in, out);
    case DT_DOUBLE:
      return ConvertAll<To, double>(in, out);
    case DT_BOOL:
      return ConvertAll<To, bool>(in, out);
    default:
      return;  // Rejected by the caller.
  }
}

class Cast : public Udf {
 public:
  Cast(int64_t index, DataType dtype) : index_(index), dtype_(dtype) {}

  absl::Status Map(Element& element, const UdfCall& call) const override {
    ASSIGN_OR_RETURN(
        Tensor * t,
        MutableTensorAt(element, index_,
                        {DT_UINT8, DT_INT32, DT_INT64, DT_FLOAT, DT_DOUBLE, DT_BOOL}, kName));
    if (t->dtype() == dtype_) return absl::OkStatus();
    Tensor out = Tensor::Uninitialized(dtype_, t->shape());
    switch (dtype_) {
      case DT_UINT8:
        ConvertFrom<uint8_t>(*t, &out);
        break;
      case DT_INT32:
        ConvertFrom<int32_t>(*t, &out);
        break;
      case DT_INT64:
        ConvertFrom<int64_t>(*t, &out);
        break;
      case DT_FLOAT:
        ConvertFrom<float>(*t, &out);
        break;
      case DT_DOUBLE:
        ConvertFrom<double>(*t, &out);
        break;
      case DT_BOOL:
        ConvertFrom<bool>(*t, &out);
        break;
      default:
        return absl::InternalError(
            absl::StrCat(kName, ": unexpected target dtype ", std::string(DataTypeName(dtype_))));
    }
    *t = std::move(out);
    return absl::OkStatus();
  }

 private:
  const int64_t index_;
  const DataType dtype_;
};

}  // namespace

void RegisterCastUdf(UdfRegistry* registry) {
  UdfInfo info = CastUdfDeclaration();
  info.factory = [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
    ASSIGN_OR_RETURN(const CastConfig config, ReadCastConfig(p));
    return std::make_unique<Cast>(config.index, config.dtype);
  };
  registry->Register(std::move(info)).IgnoreError();
}

}  // namespace granary
