// Fuzz target: journal record decoding (journal/format.h) and replay, as DispatcherImpl::Recover
// does it: each record's value is checked (checksum) and parsed as an Update, which
// DispatcherState::Apply applies to the state built by the records before it; the state
// invariant checker (dispatcher/state_invariants.h) then runs over the result. Apply of any
// Update must be total: it may refuse (a status) but never throw, abort or allocate without
// bound.
//
// Input: records back to back, each a 4-byte little-endian length and that many bytes (at most
// 64 records). A record that verifies as a journal value under its key ('r' + seq) is replayed
// from its payload; any other is replayed as the raw bytes of an Update, so that the fuzzer need
// not forge checksums to reach Apply.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "dispatcher/dispatcher_state.h"
#include "dispatcher/state_invariants.h"
#include "fuzz/fuzz_util.h"
#include "journal/format.h"
#include "proto/journal.pb.h"

using granary::fuzz::Check;
namespace jf = granary::journal_format;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view input(reinterpret_cast<const char*>(data), size);
  granary::DispatcherState state;
  for (uint64_t seq = 1; seq <= 64 && input.size() >= 4; ++seq) {
    const uint32_t length = static_cast<uint8_t>(input[0]) |
                            static_cast<uint32_t>(static_cast<uint8_t>(input[1])) << 8 |
                            static_cast<uint32_t>(static_cast<uint8_t>(input[2])) << 16 |
                            static_cast<uint32_t>(static_cast<uint8_t>(input[3])) << 24;
    input.remove_prefix(4);
    const absl::string_view value = input.substr(0, length);
    input.remove_prefix(value.size());

    const std::string key = jf::RecordKey(seq);
    Check(jf::ParseSeqKey(jf::kRecordPrefix, key) == seq, "record keys parse back");
    (void)jf::ParseSeqKey(jf::kRecordPrefix, value);
    absl::string_view payload = value;
    absl::StatusOr<absl::string_view> decoded = jf::DecodeValue(key, value);
    if (decoded.ok()) payload = *decoded;
    Check(jf::DecodeValue(key, jf::EncodeValue(key, payload)).ok(), "encoded values verify");

    granary::Update update;
    if (!update.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) continue;
    (void)state.Apply(state.applied_seq() + 1, update);
    (void)granary::CheckStateInvariants(state);
  }
  // The state survives its own snapshot.
  absl::StatusOr<granary::DispatcherState> restored =
      granary::DispatcherState::FromProto(state.ToProto());
  Check(restored.ok(), "a state's snapshot loads");
  return 0;
}
