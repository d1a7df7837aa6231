// The blob EpochReader::SavePosition() returns and Job::ReadEpoch() resumes from: a magic
// prefix ("GPOS1") followed by the deterministic serialization of a ClientPosition
// (proto/client.proto). The magic makes a blob of some other kind (a model checkpoint, a
// truncated file) fail loudly instead of parsing as an empty position.
#ifndef GRANARY_CLIENT_POSITION_H_
#define GRANARY_CLIENT_POSITION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/client.pb.h"

namespace granary {

std::string EncodePosition(const ClientPosition& position);

// Decodes `blob`: InvalidArgument for a malformed blob or a negative index.
absl::StatusOr<ClientPosition> ParsePosition(const std::string& blob);

// Decodes `blob` and checks that it is a position of (job_id, epoch, consumer) with no
// negative index. InvalidArgument naming what is wrong: a malformed blob, or each field that
// does not match ("position does not match this reader: its epoch is 1, not 2").
absl::StatusOr<ClientPosition> DecodePosition(const std::string& blob, int64_t job_id,
                                              int64_t epoch, int32_t consumer);

}  // namespace granary

#endif  // GRANARY_CLIENT_POSITION_H_
