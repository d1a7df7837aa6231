// Keeps large allocations in malloc's heap, so that a freed multi-megabyte buffer is reused
// instead of unmapped and mapped afresh.
//
// glibc serves every allocation above 32 MiB (its largest mmap threshold) with a fresh mmap and
// unmaps it on free, so each one costs a page fault and a page zeroing per 4 KiB touched. A batch
// of 128 float32 224x224 crops is 59 MB and passes through several such buffers on its way from
// worker to trainer: measured on the ResNet-style pipeline at batch 128, page faults made the
// service 1.7x and the in-process pipeline 2.4x slower (bench/RESULTS.md).
//
// KeepLargeAllocationsInHeap() turns mmap-backed allocations off (M_MMAP_MAX = 0) and raises the
// trim threshold to 1 GiB, so freed memory stays with the process for the next batch. The price:
// the process keeps its peak heap (up to 1 GiB of it) after a burst. Every `granary` subcommand
// calls it at start; a trainer process that reads large batches through the client library can
// call it too, or set the same through the environment before it starts:
//   GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824
#ifndef GRANARY_COMMON_LARGE_ALLOCATIONS_H_
#define GRANARY_COMMON_LARGE_ALLOCATIONS_H_

namespace granary {

// Call early, before threads allocate. False if malloc refused a setting.
bool KeepLargeAllocationsInHeap();

}  // namespace granary

#endif  // GRANARY_COMMON_LARGE_ALLOCATIONS_H_
