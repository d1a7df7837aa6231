// What becomes of an allocation that fails inside an op or a UDF: a ResourceExhausted error of
// that element or op (pipeline/core/limits.h), not an exception that unwinds out of a worker thread
// and ends the process.
//
// std::bad_alloc (the allocation failed) and std::length_error (a container asked for more than
// it can ever hold) are caught; every other exception passes through unchanged.
#ifndef GRANARY_PIPELINE_CORE_ALLOCATION_GUARD_H_
#define GRANARY_PIPELINE_CORE_ALLOCATION_GUARD_H_

#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "pipeline/core/iterator.h"

namespace granary {

// fn(), or ResourceExhausted "out of memory: ..." when it throws std::bad_alloc or
// std::length_error. Callers add the context (op, element) with Annotate.
absl::Status CatchAllocationFailure(absl::FunctionRef<absl::Status()> fn);

// `it` with its GetNext, Save and Restore run under CatchAllocationFailure, errors caught so
// prefixed with `label` ("op 3 (batch)"). Pipeline::MakeIterator wraps the source and each op.
std::unique_ptr<Iterator> GuardAllocations(std::unique_ptr<Iterator> it, std::string label);

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_ALLOCATION_GUARD_H_
