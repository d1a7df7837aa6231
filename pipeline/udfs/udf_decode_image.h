// decode_jpeg and decode_image: replace the encoded image at `index` (a string scalar) by its
// pixels, uint8 [height, width, channels]. decode_jpeg accepts only JPEG; decode_image sniffs
// JPEG or PNG by magic bytes. params: index (default 0), channels (default 3; 1 for grayscale,
// 3 for RGB, 0 for as encoded, see image_codec.h). The class is here for the decode-crop fusion
// (decode_crop_fusion.h); pipelines get it from the registry (RegisterDecodeImageUdfs).
#ifndef GRANARY_PIPELINE_UDFS_UDF_DECODE_IMAGE_H_
#define GRANARY_PIPELINE_UDFS_UDF_DECODE_IMAGE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "pipeline/core/udf.h"

namespace granary {

class DecodeImageUdf : public Udf {
 public:
  DecodeImageUdf(const char* name, bool jpeg_only, int64_t index, int channels)
      : name_(name), jpeg_only_(jpeg_only), index_(index), channels_(channels) {}

  absl::Status Map(Element& element, const UdfCall& call) const override;

  // The tensor at index() if it is a string scalar (one encoded image); the error Map reports
  // otherwise.
  absl::StatusOr<Tensor*> EncodedImage(Element& element) const;

  const char* name() const { return name_; }
  bool jpeg_only() const { return jpeg_only_; }
  int64_t index() const { return index_; }
  int channels() const { return channels_; }

 private:
  const char* const name_;
  const bool jpeg_only_;
  const int64_t index_;
  const int channels_;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_UDFS_UDF_DECODE_IMAGE_H_
