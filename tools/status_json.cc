#include "tools/status_json.h"

#include "google/protobuf/util/json_util.h"

namespace granary {

std::string StatusJson(const GetStatusResponse& status) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  // Printing a message this process built cannot fail (no Any fields to resolve).
  (void)google::protobuf::util::MessageToJsonString(status, &json, options);
  return json;
}

}  // namespace granary
