// Fuzz target: loading a dispatcher snapshot, as DispatcherImpl::Recover does: the bytes parse
// as a DispatcherStateProto, DispatcherState::FromProto builds the state, and the invariant
// checker (dispatcher/state_invariants.h) must say DataLoss for an inconsistent one, never throw
// (std::map::at) or crash. A state that loads and passes the checker must snapshot back to a
// state that does too.
#include <cstddef>
#include <cstdint>

#include "dispatcher/dispatcher_state.h"
#include "dispatcher/state_invariants.h"
#include "fuzz/fuzz_util.h"
#include "proto/dispatcher_state.pb.h"

using granary::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  granary::DispatcherStateProto proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<granary::DispatcherState> state = granary::DispatcherState::FromProto(proto);
  if (!state.ok()) return 0;
  if (!granary::CheckStateInvariants(*state).ok()) return 0;
  absl::StatusOr<granary::DispatcherState> again =
      granary::DispatcherState::FromProto(state->ToProto());
  Check(again.ok(), "a consistent state's snapshot loads");
  Check(granary::CheckStateInvariants(*again).ok(), "a consistent state's snapshot is consistent");
  return 0;
}
