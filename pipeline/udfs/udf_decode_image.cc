#include "pipeline/udfs/udf_decode_image.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/spec/udf_declarations.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/image/image_codec.h"
#include "pipeline/core/udf_tensor_access.h"

namespace granary {

absl::StatusOr<Tensor*> DecodeImageUdf::EncodedImage(Element& element) const {
  ASSIGN_OR_RETURN(Tensor * t, MutableTensorAt(element, index_, DT_STRING, name_));
  if (t->rank() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": tensor ", index_, " is ",
                                                   t->DebugString(),
                                                   ", need string[] (one encoded image)"));
  }
  return t;
}

absl::Status DecodeImageUdf::Map(Element& element, const UdfCall&) const {
  ASSIGN_OR_RETURN(Tensor * t, EncodedImage(element));
  const std::string& bytes = t->strings()[0];
  absl::StatusOr<Tensor> image;
  if (jpeg_only_) {
    if (SniffImageFormat(bytes) == ImageFormat::kPng) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": the input is a PNG (first bytes ", FirstBytesHex(bytes),
                       "), not a JPEG; use decode_image to decode PNG and JPEG"));
    }
    image = DecodeJpeg(bytes, channels_);
  } else {
    image = DecodeImage(bytes, channels_);
  }
  if (!image.ok()) return Annotate(image.status(), name_);
  *t = *std::move(image);
  return absl::OkStatus();
}

namespace {

// `declaration` with the factory of a DecodeImageUdf named `name` (a literal: the UDF keeps it).
UdfInfo WithDecoder(UdfInfo declaration, const char* name, bool jpeg_only) {
  declaration.factory = [name, jpeg_only](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
    ASSIGN_OR_RETURN(const DecodeImageConfig config, ReadDecodeImageConfig(p));
    return std::make_unique<DecodeImageUdf>(name, jpeg_only, config.index, config.channels);
  };
  return declaration;
}

}  // namespace

void RegisterDecodeImageUdfs(UdfRegistry* registry) {
  registry->Register(WithDecoder(DecodeJpegUdfDeclaration(), "decode_jpeg", /*jpeg_only=*/true))
      .IgnoreError();
  registry
      ->Register(WithDecoder(DecodeImageUdfDeclaration(), "decode_image", /*jpeg_only=*/false))
      .IgnoreError();
}

}  // namespace granary
