// Limits on the sizes a pipeline implies, chosen to be generous for ML inputs and to keep one
// element (or one batch) within what a worker can allocate and ship. Pipeline::Create refuses
// params beyond them with an InvalidArgument naming the op, the param and the limit:
//   "op 0 (batch): param 'batch_size' is 100000000000, above the limit 1048576 (kMaxBatchSize)"
// and the ops whose output size depends on data check it before allocating: batch and resize fail
// with ResourceExhausted, the image decoders refuse an oversized image as InvalidArgument. An
// allocation that still fails inside an op or UDF is a ResourceExhausted error of that element
// (allocation_guard.h), never an exception that ends the process.
#ifndef GRANARY_PIPELINE_CORE_LIMITS_H_
#define GRANARY_PIPELINE_CORE_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "pipeline/core/params.h"

namespace granary {

// Rows in one batch (batch's batch_size). ImageNet-scale training uses at most a few thousand.
inline constexpr int64_t kMaxBatchSize = int64_t{1} << 20;
// The largest op position an OpDef.original_index (AutoOrder's) may name.
inline constexpr int64_t kMaxOps = int64_t{1} << 20;
// Each side of an image an op produces (resize, random_crop), in pixels.
inline constexpr int64_t kMaxImageSide = 65536;
// Pixels (height * width) of an image an op produces or a decoder accepts: 256 Mpixel. A corrupt
// header cannot make a decoder allocate more.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;
// Bytes of tensor content in one element, a batch included: 2 GiB.
inline constexpr int64_t kMaxElementBytes = int64_t{1} << 31;
// Bytes of one record (a TFRecord's data, a text line) the file sources read unless their
// "max_record_bytes" param says otherwise (at most kMaxElementBytes): 256 MiB, far above an
// image or an Example, far below a worker's memory. A line without end (/dev/zero, a sparse file)
// or a corrupt TFRecord length fails its task with DataLoss once this much is read, instead of
// growing the worker until it is killed.
inline constexpr int64_t kDefaultMaxRecordBytes = int64_t{1} << 28;

// params.Invalid(name, "is <value>, above the limit <limit> (<limit_name>)") when value > limit,
// else OK.
absl::Status CheckParamLimit(const Params& params, absl::string_view name, int64_t value,
                             int64_t limit, absl::string_view limit_name);

// "2 GiB", "4.5 GiB", "12 MiB", "512 bytes": how limit errors show sizes.
std::string HumanBytes(double bytes);

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_LIMITS_H_
