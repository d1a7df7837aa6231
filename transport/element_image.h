// The element wire image (transport/FORMAT.md): how an element's bytes travel from the
// pipeline's batch to the trainer, and how they rest in the worker's window, in shared memory and
// in cache chunks.
//
// An image is a serialized ElementProto (proto/pipeline.proto) — any protobuf parser reads it —
// laid out so that every numeric tensor's content starts 64-byte aligned from the image's first
// byte (an `alignment_padding` field of zeros precedes it). Held in a 64-byte-aligned Buffer,
// the contents are therefore aligned in memory too, and a reader can hand out TensorViews that
// point straight into the image: no parse into objects, no copy.
//
// Writing (ImageLayout): the producer knows each tensor's dtype and shape before it has the
// values (batch does, after its first row). It lays the image out, allocates one buffer,
// writes the framing (tags, lengths, dtypes, shapes, string values, padding, provenance) and then
// fills each content region in place — the image is serialized by construction, not by a pass.
//
// Reading (ParseImage): walks the framing only, checking every length against the image's
// size, every dtype, shape and content size against each other; it never reads the contents.
// Any bytes are safe to give it (it is fuzzed: fuzz/element_image_fuzzer.cc).
#ifndef GRANARY_TRANSPORT_ELEMENT_IMAGE_H_
#define GRANARY_TRANSPORT_ELEMENT_IMAGE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/pipeline.pb.h"
#include "transport/buffer_pool.h"
#include "transport/tensor_view.h"

namespace granary {

inline constexpr size_t kImageAlignment = 64;

// Bytes per value of a numeric dtype; 0 for DT_STRING and invalid dtypes.
size_t DtypeSize(DataType dtype);

// One tensor of an image to be written.
struct ImageTensorSpec {
  DataType dtype = DT_INVALID;
  std::vector<int64_t> shape;
  // DT_STRING: the values, copied into the framing. Not owned; must outlive the ImageLayout.
  const std::vector<std::string>* strings = nullptr;
};

class ImageLayout {
 public:
  // REQUIRES: every dtype valid, dimensions non-negative, a DT_STRING spec has `strings` with
  // one value per element of its shape.
  ImageLayout(const std::vector<ImageTensorSpec>& tensors, uint64_t split_id, int64_t record);

  // The image's size in bytes.
  size_t size() const { return size_; }
  // Where tensor `i`'s numeric content starts (a multiple of kImageAlignment), and its length.
  size_t content_offset(size_t i) const { return tensors_[i].content_offset; }
  size_t content_size(size_t i) const { return tensors_[i].content_size; }

  // Writes every byte of the image except the numeric contents into `out` (size() bytes).
  void WriteFraming(char* out) const;

 private:
  struct Laid {
    // Serialized tag + length of the ElementProto.tensors field, then the TensorProto up to
    // and including the content field's tag and length.
    std::string framing;
    size_t framing_offset = 0;
    size_t content_offset = 0;
    size_t content_size = 0;
  };
  std::vector<Laid> tensors_;
  std::string trailer_;  // split_id and record fields.
  size_t size_ = 0;
};

// An image's parsed framing: views into its bytes.
struct ImageView {
  std::vector<TensorView> tensors;
  uint64_t split_id = 0;
  int64_t record = 0;
};

// Parses the framing of `image` (any serialized ElementProto). DataLoss naming the byte offset
// and what is wrong for malformed protobuf; InvalidArgument naming the tensor for a consistent
// encoding of an inconsistent tensor (an invalid dtype, a negative dimension, content size not
// matching dtype and shape, a string count not matching the shape).
absl::StatusOr<ImageView> ParseImage(absl::string_view image);

// A new image of the element `view` describes, written by ImageLayout into a buffer from
// `pool`: its contents aligned whatever the writer of `view`'s image did.
absl::StatusOr<BufferRef> WriteAlignedImage(const ImageView& view, BufferPool* pool);

// Whether every numeric tensor of `view` is aligned to its dtype's size in memory (true for
// images Granary writes into aligned buffers; a reader copies other images before viewing them).
bool ContentsAligned(const ImageView& view);

}  // namespace granary

#endif  // GRANARY_TRANSPORT_ELEMENT_IMAGE_H_
