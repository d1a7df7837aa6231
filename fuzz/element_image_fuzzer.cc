// Fuzz target: the data plane's readers of untrusted bytes — ParseImage (an element's wire image,
// transport/element_image.h), and the client's GetElements answer reader over gRPC slices
// (transport/elements_reply.h), the input cut into two slices at a point its first byte picks.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_util.h"
#include "transport/element_image.h"
#include "transport/elements_reply.h"

using granary::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<granary::ImageView> view = granary::ParseImage(bytes);
  if (view.ok()) {
    for (const granary::TensorView& t : view->tensors) {
      Check(t.size == 0 || (t.data >= bytes.data() && t.data + t.size <= bytes.data() + size),
            "contents lie within the image");
      for (absl::string_view s : t.strings) {
        Check(s.empty() || (s.data() >= bytes.data() && s.data() + s.size() <= bytes.data() + size),
              "string values lie within the image");
      }
    }
    // Laid out anew, aligned, it reads back as the same element.
    absl::StatusOr<granary::BufferRef> aligned =
        granary::WriteAlignedImage(*view, granary::BufferPool::Default());
    Check(aligned.ok(), "an element that parses can be written");
    absl::StatusOr<granary::ImageView> again = granary::ParseImage((*aligned)->bytes());
    Check(again.ok() && granary::ContentsAligned(*again), "the aligned image parses, aligned");
    Check(again->tensors.size() == view->tensors.size() && again->split_id == view->split_id &&
              again->record == view->record,
          "same element");
    for (size_t i = 0; i < view->tensors.size(); ++i) {
      Check(again->tensors[i].content() == view->tensors[i].content() &&
                again->tensors[i].shape == view->tensors[i].shape &&
                again->tensors[i].strings == view->tensors[i].strings,
            "same tensors");
    }
  } else {
    Check(absl::IsDataLoss(view.status()) || absl::IsInvalidArgument(view.status()),
          "a bad image is DataLoss or InvalidArgument");
  }

  const size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  std::vector<grpc::Slice> slices;
  slices.emplace_back(data, cut);
  slices.emplace_back(data + cut, size - cut);
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  granary::ReceivedReply reply;
  Check(grpc::SerializationTraits<granary::ReceivedReply>::Deserialize(&buffer, &reply).ok(),
        "the reader reports, never fails");
  for (const granary::ReceivedPayload& p : reply.elements) {
    Check(p.payload.size() <= size, "a payload lies within the answer");
    std::string copy(p.payload.size(), '\0');
    p.payload.CopyAndHash(copy.data());
  }
  return 0;
}
