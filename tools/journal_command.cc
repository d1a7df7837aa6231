// granary journal dump: prints a (stopped) dispatcher's journal as JSON, one record a line,
// after a summary of the snapshot it starts from.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "google/protobuf/util/json_util.h"
#include "journal/journal.h"
#include "proto/dispatcher_state.pb.h"
#include "proto/journal.pb.h"
#include "tools/command_flags.h"
#include "tools/commands.h"

GRANARY_COMMAND_BORROWS_FLAG(std::string, journal_dir);

namespace granary {

int JournalCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage("granary journal dump --journal_dir D");
  std::vector<char*> args = ParseCommandFlags(argc, argv);
  if (args.size() != 2 || std::string(args[1]) != "dump") {
    std::fprintf(stderr, "granary journal: the only action is dump: granary journal dump ...\n");
    return 2;
  }
  const std::string dir = absl::GetFlag(FLAGS_journal_dir);
  const auto fail = [](const absl::Status& status) {
    std::fprintf(stderr, "granary journal: %s\n", std::string(status.message()).c_str());
    return 1;
  };
  if (dir.empty()) return fail(absl::InvalidArgumentError("--journal_dir is required"));
  auto journal = Journal::Open(dir, {});
  if (!journal.ok()) return fail(journal.status());
  auto recovered = (*journal)->Recover();
  if (!recovered.ok()) return fail(recovered.status());
  google::protobuf::util::JsonPrintOptions json;
  json.preserve_proto_field_names = true;
  if (recovered->has_snapshot) {
    DispatcherStateProto state;
    state.ParseFromString(recovered->snapshot);
    std::printf(
        "{\"snapshot_seq\":%llu,\"datasets\":%d,\"jobs\":%d,\"epochs\":%d,\"tasks\":%d,"
        "\"workers\":%d}\n",
        static_cast<unsigned long long>(recovered->snapshot_seq), state.datasets_size(),
        state.jobs_size(), state.epochs_size(), state.tasks_size(), state.workers_size());
  }
  for (const auto& [seq, bytes] : recovered->records) {
    Update update;
    std::string text;
    if (!update.ParseFromString(bytes) ||
        !google::protobuf::util::MessageToJsonString(update, &text, json).ok()) {
      return fail(absl::DataLossError("record " + std::to_string(seq) + " is not an Update"));
    }
    std::printf("{\"seq\":%llu,\"update\":%s}\n", static_cast<unsigned long long>(seq),
                text.c_str());
  }
  return 0;
}

}  // namespace granary
