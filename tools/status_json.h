// The JSON of a dispatcher's status (GetStatusResponse, asked with summary = true): what
// `/status.json` serves to the status page and `granary status --json` prints. Protobuf's JSON
// mapping with the proto field names (snake_case), zero values included, enums by name and
// 64-bit integers as strings.
#ifndef GRANARY_TOOLS_STATUS_JSON_H_
#define GRANARY_TOOLS_STATUS_JSON_H_

#include <string>

#include "proto/dispatcher.pb.h"

namespace granary {

std::string StatusJson(const GetStatusResponse& status);

}  // namespace granary

#endif  // GRANARY_TOOLS_STATUS_JSON_H_
