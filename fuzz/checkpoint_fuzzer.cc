// Fuzz target: checkpoint file decoding (checkpoint/checkpoint_store.h, DecodeCheckpointFile),
// and the store reading such a file from its directory, as a restarted worker does (Newest).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "checkpoint/checkpoint_store.h"
#include "common/env.h"
#include "fuzz/fuzz_util.h"
#include "glog/logging.h"

using granary::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string owner;
  absl::StatusOr<granary::Checkpoint> checkpoint =
      granary::DecodeCheckpointFile(bytes, "fuzz.ckpt", &owner);
  if (checkpoint.ok()) {
    Check(owner.size() + checkpoint->state.size() + 48 + 4 == size,
          "owner and state are the file minus header and CRC");
  }

  // The store over a private directory holding the bytes under the name of task 1, index 0,
  // generation 0 (checkpoint/FORMAT.md), for the empty owner. Newest never fails but with NotFound
  // here: a file that does not verify is skipped.
  static granary::CheckpointStore* const store = [] {
    FLAGS_minloglevel = 2;  // The store logs every file it skips.
    static char dir[] = "/tmp/granary-checkpoint-fuzz-XXXXXX";
    Check(mkdtemp(dir) != nullptr, "a temporary directory");
    std::atexit([] { rmdir(dir); });
    return granary::CheckpointStore::Open(granary::Env::Default(), dir)->release();
  }();
  const std::string path = store->dir() + "/task-1-idx-00000000000000000000-gen-0.ckpt";
  {
    FILE* file = std::fopen(path.c_str(), "wb");
    Check(file != nullptr, "the checkpoint file can be written");
    Check(std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size(), "written");
    std::fclose(file);
  }
  absl::StatusOr<granary::Checkpoint> newest = store->Newest(1, 1000);
  Check(newest.ok() || absl::IsNotFound(newest.status()), "Newest skips a bad file");
  if (newest.ok()) {
    Check(checkpoint.ok() && owner.empty() && newest->state == checkpoint->state,
          "the store reads what DecodeCheckpointFile decodes");
  }
  std::remove(path.c_str());
  return 0;
}
