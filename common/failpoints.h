// The catalogue of failpoints (common/failpoint.h): every place in Granary where a fault
// can be injected, named `component.place`. A site passes its constant to HitFailpoint; only
// names listed in kAllFailpoints can be armed, and `granary chaos --failpoints` prints them.
#ifndef GRANARY_COMMON_FAILPOINTS_H_
#define GRANARY_COMMON_FAILPOINTS_H_

#include "common/failpoint.h"

namespace granary {

inline constexpr Failpoint kJournalAfterWriteBeforeApply{
    "journal.after_write_before_apply",
    "dispatcher: an update is durable in the journal, not yet applied to the state"};
inline constexpr Failpoint kJournalMidGroupCommit{
    "journal.mid_group_commit",
    "journal: a group commit's batch is written, none of the group's writers answered yet"};
inline constexpr Failpoint kDispatcherAfterLeaseBeforeReply{
    "dispatcher.after_lease_before_reply",
    "dispatcher: a split lease is journaled and applied, the worker not answered yet"};
inline constexpr Failpoint kDispatcherAfterScaleBeforeReply{
    "dispatcher.after_scale_before_reply",
    "dispatcher: a scaling step (tasks added or shed) is journaled and applied, not answered"};
inline constexpr Failpoint kWorkerAfterProduceBeforeSend{
    "worker.after_produce_before_send",
    "worker: a GetElements answer holds produced elements, not sent yet"};
// Its `error` action makes a deliberately broken worker: the run's first served element is
// dropped silently and the next one takes its index. `granary chaos --testonly_break_workers`
// arms it to prove that the harness can fail.
inline constexpr Failpoint kWorkerAfterResumeBeforeServe{
    "worker.after_resume_before_serve",
    "worker: a task run resumed past its start (from a checkpoint, or recomputing) is made, no "
    "element served yet"};
inline constexpr Failpoint kCheckpointAfterWriteBeforeRename{
    "checkpoint.after_write_before_rename",
    "checkpoint store: a checkpoint's temporary is written and synced, not renamed yet"};
inline constexpr Failpoint kPutAfterCheckpointBeforeCommit{
    "put.after_checkpoint_before_commit",
    "cache Put: the checkpoint naming sealed chunks is written, the chunks not committed yet"};
inline constexpr Failpoint kPutMidChunkWrite{
    "put.mid_chunk_write",
    "cache Put: an element was appended to a chunk temporary that stays open"};
inline constexpr Failpoint kGetMidChunk{
    "get.mid_chunk", "cache Get: a record of a chunk was read, the chunk not finished"};

inline constexpr const Failpoint* kAllFailpoints[] = {
    &kJournalAfterWriteBeforeApply,
    &kJournalMidGroupCommit,
    &kDispatcherAfterLeaseBeforeReply,
    &kDispatcherAfterScaleBeforeReply,
    &kWorkerAfterProduceBeforeSend,
    &kWorkerAfterResumeBeforeServe,
    &kCheckpointAfterWriteBeforeRename,
    &kPutAfterCheckpointBeforeCommit,
    &kPutMidChunkWrite,
    &kGetMidChunk,
};

}  // namespace granary

#endif  // GRANARY_COMMON_FAILPOINTS_H_
