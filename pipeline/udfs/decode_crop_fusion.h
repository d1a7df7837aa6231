// Fusing a JPEG decode with the crop right after it (issue 18). JPEG decoding is the ceiling
// of an image pipeline, and a random crop throws most of the decoded image away: run fused, the
// crop chooses its window from the image's header and only the window is decoded
// (DecodeJpegWindow), with the same output bytes, the same random draws and the same errors as
// the two UDFs run one after the other. Pipeline marks the fusable pairs of a fused map chain
// (OpBuildArgs::decode_crop_with_next) and InvokeMapUdfs runs them.
//
// The exception, opt-in: a crop whose pipeline asked for DCT-domain scaling
// (CropUdf::scaled_decode_floor, random_resized_crop's dct_scaling) gets a large window decoded
// at 1/2, 1/4 or 1/8 before it resizes it — approximately its pixels, faster, and deterministic;
// only here, fused, so a crop not right after its decode (or a plan without the fusion) stays
// exact.
#ifndef GRANARY_PIPELINE_UDFS_DECODE_CROP_FUSION_H_
#define GRANARY_PIPELINE_UDFS_DECODE_CROP_FUSION_H_

#include "absl/status/status.h"
#include "pipeline/core/udf.h"

namespace granary {

// Whether `decode` then `crop` may run fused: a decode_jpeg / decode_image followed by a crop
// UDF (image_crop.h: random_crop, random_resized_crop) of the tensor it decodes.
bool FusesDecodeCrop(const Udf& decode, const Udf& crop);

// Runs `decode` (with `decode_call`) then `crop` (with `crop_call`) on `element` as one partial
// decode — what decode.Map then crop.Map would do, byte for byte; images that are not JPEG are
// decoded whole and cropped. On failure *crop_failed tells whose error it is (the crop's, else
// the decode's), for the op label. REQUIRES: FusesDecodeCrop(decode, crop).
absl::Status RunDecodeCrop(const Udf& decode, const UdfCall& decode_call, const Udf& crop,
                           const UdfCall& crop_call, Element& element, bool* crop_failed);

}  // namespace granary

#endif  // GRANARY_PIPELINE_UDFS_DECODE_CROP_FUSION_H_
