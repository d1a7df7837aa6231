// How deep the params of a PipelineDef may nest (objects and lists within one param's value),
// checked wherever a pipeline enters: parsing its JSON (pipeline/pipeline_loader.h) and the
// client library's RegisterPipeline, before it is sent.
//
// Why: protobuf parses a message at most 100 levels deep, and each level of a
// google.protobuf.Struct costs two or three (Struct, its map entry, Value). A pipeline whose
// udfParams nest 60 levels deep parsed from JSON, and then the dispatcher's gRPC server could
// not parse the request: the client got INTERNAL with an empty message. No param takes more than
// a list (one level), so the limit only has to stay far below what protobuf parses in every
// message that carries a pipeline (requests, heartbeat answers, journal records, snapshots).
#ifndef GRANARY_COMMON_PARAM_NESTING_H_
#define GRANARY_COMMON_PARAM_NESTING_H_

#include <string>

#include "absl/status/status.h"
#include "proto/pipeline.pb.h"

namespace granary {

// Levels of objects and lists one param's value may hold: 1 is 5, [1] and {"a": 1} each 1,
// {"a": [1]} 2.
inline constexpr int kMaxParamNesting = 16;

// "op 3 (map)" or "op 3 (map, udf 'random_crop')": how errors name an op at `index`.
std::string OpLabel(int index, const OpDef& op);

// OK when no param of `def` (the source's params, each op's params and udfParams) nests deeper
// than kMaxParamNesting; else InvalidArgument naming where and the limit:
//   "op 2 (map, udf 'add'): udfParams 'value' nests more than 16 levels deep (kMaxParamNesting)"
absl::Status CheckParamNesting(const PipelineDef& def);

}  // namespace granary

#endif  // GRANARY_COMMON_PARAM_NESTING_H_
