#include "pipeline/element.h"

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace granary {

std::string Element::Origin() const { return absl::StrCat("split ", split_id, " record ", record); }

uint64_t Element::ProvenanceKey() const {
  return HashCombine(split_id, static_cast<uint64_t>(record));
}

size_t Element::ByteSize() const {
  size_t size = 0;
  for (const Tensor& t : tensors) size += t.ByteSize();
  return size;
}

void Element::ToProto(ElementProto* proto) const {
  proto->Clear();
  for (const Tensor& t : tensors) t.ToProto(proto->add_tensors());
  proto->set_split_id(split_id);
  proto->set_record(record);
}

std::string Element::SerializeAsProto() const {
  using google::protobuf::io::CodedOutputStream;
  using WireFormat = google::protobuf::internal::WireFormatLite;
  // Each tensor but its numeric content, serialized as protobuf would (fields 1, 2 and 4), and
  // the tensor's whole serialized size: content is field 3, so for a numeric tensor (no field 4)
  // it follows the header.
  struct Header {
    std::string bytes;
    size_t tensor_size;
  };
  std::vector<Header> headers(tensors.size());
  size_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TensorProto header;
    tensors[i].ToProtoWithoutContent(&header);
    headers[i].bytes = header.SerializeAsString();
    headers[i].tensor_size = headers[i].bytes.size();
    if (const size_t content = tensors[i].content().size(); content > 0) {
      headers[i].tensor_size += 1 + WireFormat::LengthDelimitedSize(content);
    }
    total += 1 + WireFormat::LengthDelimitedSize(headers[i].tensor_size);
  }
  ElementProto provenance;
  provenance.set_split_id(split_id);
  provenance.set_record(record);
  const std::string trailer = provenance.SerializeAsString();
  total += trailer.size();

  // Appends a length-delimited field's tag and length.
  const auto append_field_start = [](int field, size_t length, std::string* out) {
    uint8_t buffer[16];
    uint8_t* end =
        WireFormat::WriteTagToArray(field, WireFormat::WIRETYPE_LENGTH_DELIMITED, buffer);
    end = CodedOutputStream::WriteVarint64ToArray(length, end);
    out->append(reinterpret_cast<const char*>(buffer), end - buffer);
  };
  std::string out;
  out.reserve(total);  // Appended, not zero-filled first: the contents are written once.
  for (size_t i = 0; i < tensors.size(); ++i) {
    append_field_start(ElementProto::kTensorsFieldNumber, headers[i].tensor_size, &out);
    out.append(headers[i].bytes);
    const absl::string_view content = tensors[i].content();
    if (content.empty()) continue;
    append_field_start(TensorProto::kContentFieldNumber, content.size(), &out);
    out.append(content.data(), content.size());
  }
  out.append(trailer);
  return out;
}

absl::StatusOr<Element> Element::FromProto(const ElementProto& proto) {
  Element element;
  element.split_id = proto.split_id();
  element.record = proto.record();
  element.tensors.reserve(proto.tensors_size());
  for (const TensorProto& t : proto.tensors()) {
    ASSIGN_OR_RETURN(Tensor tensor, Tensor::FromProto(t));
    element.tensors.push_back(std::move(tensor));
  }
  return element;
}

}  // namespace granary
