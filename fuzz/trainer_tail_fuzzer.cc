// Fuzz target: the client's trainer-side tail (client/trainer_tail_runner.h), which runs steps a
// worker's answer describes on element images the worker sent — both untrusted. The input: the
// length of a serialized TrainerTailDef (2 bytes, little-endian), the def, then the image.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"
#include "client/trainer_tail_runner.h"
#include "fuzz/fuzz_util.h"
#include "transport/element_image.h"

using granary::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t def_size = std::min<size_t>(data[0] | (data[1] << 8), size - 2);
  granary::TrainerTailDef def;
  if (!def.ParseFromArray(data + 2, static_cast<int>(def_size))) return 0;
  absl::StatusOr<std::unique_ptr<granary::TrainerTailRunner>> runner =
      granary::TrainerTailRunner::Create(def);
  if (!runner.ok()) {
    Check(absl::IsInvalidArgument(runner.status()), "a tail a client cannot run is refused");
    return 0;
  }
  const absl::string_view image(reinterpret_cast<const char*>(data + 2 + def_size),
                                size - 2 - def_size);
  absl::StatusOr<granary::BufferRef> out = (*runner)->Run(image, granary::BufferPool::Default());
  if (!out.ok()) {
    Check(absl::IsInvalidArgument(out.status()) || absl::IsDataLoss(out.status()) ||
              absl::IsResourceExhausted(out.status()),
          "an element the tail cannot run on is refused");
    return 0;
  }
  // What it made is an element with as many tensors, the steps' images float32.
  absl::StatusOr<granary::ImageView> in = granary::ParseImage(image);
  absl::StatusOr<granary::ImageView> made = granary::ParseImage((*out)->bytes());
  Check(in.ok() && made.ok(), "both images parse");
  Check(made->tensors.size() == in->tensors.size() && made->split_id == in->split_id &&
            made->record == in->record,
        "the same element");
  for (const granary::TrainerTailDef::Step& step : def.steps()) {
    const granary::TensorView& t = made->tensors[step.normalize().index()];
    Check(t.dtype == granary::DT_FLOAT && t.shape == in->tensors[step.normalize().index()].shape,
          "a step's image is float32 of its shape");
  }
  return 0;
}
