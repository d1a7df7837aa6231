// Serializing a protobuf message to the same bytes on every run and machine. Plain
// SerializeAsString() may order map entries differently from one process to the next; anything
// hashed (fingerprints) or compared byte for byte (generated datasets) goes through here.
#ifndef GRANARY_COMMON_DETERMINISTIC_SERIALIZATION_H_
#define GRANARY_COMMON_DETERMINISTIC_SERIALIZATION_H_

#include <string>

#include "google/protobuf/message_lite.h"

namespace granary {

std::string SerializeDeterministically(const google::protobuf::MessageLite& message);

}  // namespace granary

#endif  // GRANARY_COMMON_DETERMINISTIC_SERIALIZATION_H_
