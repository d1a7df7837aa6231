#include "bench/pytorch_peer_runner.h"

#include <chrono>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "google/protobuf/util/json_util.h"

ABSL_FLAG(std::string, python, "/usr/bin/python3", "Debian's Python, with python3-torch.");
ABSL_FLAG(std::string, peer_script, "bench/pytorch_peer.py", "The PyTorch DataLoader peer.");

namespace granary {

absl::StatusOr<google::protobuf::Struct> ResultLine(const std::string& out,
                                                    const std::string& what) {
  google::protobuf::Struct line;
  const std::string first_line(out.substr(0, out.find('\n')));
  if (!google::protobuf::util::JsonStringToMessage(first_line, &line).ok()) {
    return absl::InternalError(absl::StrCat(what, " printed no result line: '", first_line, "'"));
  }
  return line;
}

double NumberOf(const google::protobuf::Struct& line, const char* key) {
  const auto it = line.fields().find(key);
  return it == line.fields().end() ? 0.0 : it->second.number_value();
}

absl::StatusOr<DataLoaderEpoch> RunDataLoaderEpoch(const std::string& data_dir, int workers,
                                                   int64_t batch_size, int64_t seed) {
  const std::string what =
      absl::StrCat(absl::GetFlag(FLAGS_peer_script), " --num_workers=", workers);
  Subprocess peer({absl::GetFlag(FLAGS_python), absl::GetFlag(FLAGS_peer_script),
                   "--data_dir=" + data_dir, absl::StrCat("--num_workers=", workers),
                   absl::StrCat("--batch_size=", batch_size), absl::StrCat("--seed=", seed)});
  if (peer.pid() < 0) return absl::UnavailableError(absl::StrCat("could not start ", what));
  const std::string out = peer.ReadAll(std::chrono::minutes(30));
  if (const int code = peer.Wait(); code != 0) {
    return absl::InternalError(absl::StrCat(what, " exited with code ", code,
                                            " (needs Debian's python3-torch, python3-pil, "
                                            "python3-numpy: scripts/setup_deps.sh installs them)"));
  }
  ASSIGN_OR_RETURN(const google::protobuf::Struct line, ResultLine(out, what));
  const auto number = [&line](const char* key) { return NumberOf(line, key); };
  if (number("images") <= 0 || number("seconds") <= 0) {
    return absl::InternalError(absl::StrCat(what, " read no images"));
  }
  DataLoaderEpoch result;
  result.images_per_s = number("images") / number("seconds");
  result.cores_busy = number("cpu_seconds") / number("seconds");
  result.rss_main = static_cast<int64_t>(number("peak_rss_main_bytes"));
  result.rss_worker = static_cast<int64_t>(number("peak_rss_workers_bytes"));
  return result;
}

}  // namespace granary
