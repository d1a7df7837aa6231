// Which clients may have Python functions run on the workers (SECURITY.md, "Python functions in
// pipelines"). A pipeline with a `python` or `python_filter` UDF runs its author's code on every
// worker that allows them (--allow_python_udfs): the operator grants that to named clients with
// the dispatcher's --python_udf_clients, and the dispatcher refuses to register such a pipeline
// for any other authenticated client. An unauthenticated caller (plain text, in-process use) may
// do everything, this included — as with jobs (dispatcher/caller.h).
#ifndef GRANARY_DISPATCHER_PYTHON_FUNCTION_GRANT_H_
#define GRANARY_DISPATCHER_PYTHON_FUNCTION_GRANT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dispatcher/caller.h"
#include "proto/pipeline.pb.h"

namespace granary {

// The grant's wildcard: every client.
inline constexpr char kEveryClient[] = "*";

// OK when `pipeline` runs no Python function, or `caller` is unauthenticated, or `granted` (the
// --python_udf_clients) names the caller or is "*". PermissionDenied otherwise, naming the first
// op that runs one, the client and the flag.
absl::Status CheckPythonFunctionGrant(const PipelineDef& pipeline, const Caller& caller,
                                      const std::vector<std::string>& granted);

}  // namespace granary

#endif  // GRANARY_DISPATCHER_PYTHON_FUNCTION_GRANT_H_
