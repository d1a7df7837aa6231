#include "bench/bench_report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/sample_stats.h"
#include "common/env.h"
#include "common/large_allocations.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

ABSL_FLAG(std::string, json_dir, "", "Write the results as <json_dir>/<benchmark>.json.");
ABSL_FLAG(bool, quick, false,
          "Tiny sizes and one repetition: checks the benchmark runs, measures nothing.");

namespace granary {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

std::string& CommandLine() {
  static std::string command_line;
  return command_line;
}

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (absl::StartsWith(line, "model name")) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

Value Number(double v) {
  Value value;
  value.set_number_value(v);
  return value;
}

Value String(const std::string& s) {
  Value value;
  value.set_string_value(s);
  return value;
}

Struct Machine() {
  Struct machine;
  auto& fields = *machine.mutable_fields();
  fields["cpu_model"] = String(CpuModel());
  fields["cores"] = Number(std::thread::hardware_concurrency());
  fields["memory_bytes"] =
      Number(static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE));
  struct utsname uts;
  ::uname(&uts);
  fields["kernel"] = String(absl::StrCat(uts.sysname, " ", uts.release));
  fields["compiler"] = String(absl::StrCat("GCC ", __VERSION__));
  fields["build_type"] = String(GRANARY_BUILD_TYPE);
  return machine;
}

}  // namespace

int BenchMain(int argc, char** argv, const char* name, const std::function<absl::Status()>& run) {
  KeepLargeAllocationsInHeap();  // As the granary servers do (and a trainer should).
  CommandLine() = absl::StrJoin(argv, argv + argc, " ");
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = run();
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s: %s\n", name, status.ToString().c_str());
  return 1;
}

bool QuickBench() { return absl::GetFlag(FLAGS_quick); }

BenchReport::BenchReport(std::string name, std::string title, int repetitions)
    : name_(std::move(name)), title_(std::move(title)), repetitions_(repetitions) {}

void BenchReport::AddSeries(const std::string& name, const std::string& unit,
                            const std::vector<double>& samples, std::optional<BenchPoint> point) {
  series_.push_back({name, unit, samples, std::move(point)});
}

void BenchReport::AddHeadline(const std::string& name, double value, const std::string& unit,
                              BenchTarget target) {
  headlines_.push_back({name, unit, value, target});
}

void BenchReport::AddNote(const std::string& note) { notes_.push_back(note); }

std::string BenchReport::ToJson() const {
  Struct report;
  auto& fields = *report.mutable_fields();
  fields["name"] = String(name_);
  fields["title"] = String(title_);
  fields["command"] = String(CommandLine());
  fields["quick"].set_bool_value(QuickBench());
  fields["repetitions"] = Number(repetitions_);
  fields["date"] = String(absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone()));
  *fields["machine"].mutable_struct_value() = Machine();
  ListValue* series = fields["series"].mutable_list_value();
  for (const Series& s : series_) {
    auto& f = *series->add_values()->mutable_struct_value()->mutable_fields();
    f["name"] = String(s.name);
    f["unit"] = String(s.unit);
    for (double v : s.samples) *f["samples"].mutable_list_value()->add_values() = Number(v);
    f["median"] = Number(Median(s.samples));
    f["spread"] = Number(Spread(s.samples));
    if (s.point) {
      f["line"] = String(s.point->line);
      f["x"] = Number(s.point->x);
    }
  }
  ListValue* headlines = fields["headlines"].mutable_list_value();
  for (const Headline& h : headlines_) {
    auto& f = *headlines->add_values()->mutable_struct_value()->mutable_fields();
    f["name"] = String(h.name);
    f["value"] = Number(h.value);
    f["unit"] = String(h.unit);
    if (h.target.kind == BenchTarget::Kind::kNone) continue;
    f[h.target.kind == BenchTarget::Kind::kAtLeast ? "target_at_least" : "target_at_most"] =
        Number(h.target.value);
    f["met"].set_bool_value(h.target.MetBy(h.value));
  }
  ListValue* notes = fields["notes"].mutable_list_value();
  for (const std::string& note : notes_) *notes->add_values() = String(note);
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(report, &json, options);
  return json;
}

absl::Status BenchReport::Finish() const {
  std::printf("%s%s\n", title_.c_str(), QuickBench() ? " (quick: not a measurement)" : "");
  std::printf("  %-52s %12s %10s  %s\n", "", "median", "spread", "unit");
  for (const Series& s : series_) {
    std::printf("  %-52s %12.4g %10.3g  %s\n", s.name.c_str(), Median(s.samples), Spread(s.samples),
                s.unit.c_str());
  }
  for (const Headline& h : headlines_) {
    std::string verdict;
    if (h.target.kind != BenchTarget::Kind::kNone) {
      verdict =
          absl::StrCat("  (target ",
                       h.target.kind == BenchTarget::Kind::kAtLeast ? ">= " : "<= ", h.target.value,
                       ": ", h.target.MetBy(h.value) ? "met" : "MISSED", ")");
    }
    std::printf("  => %-49s %12.4g  %s%s\n", h.name.c_str(), h.value, h.unit.c_str(),
                verdict.c_str());
  }
  for (const std::string& note : notes_) std::printf("  note: %s\n", note.c_str());
  std::fflush(stdout);
  const std::string dir = absl::GetFlag(FLAGS_json_dir);
  if (dir.empty()) return absl::OkStatus();
  Env* env = Env::Default();
  const std::string path = absl::StrCat(dir, "/", name_, ".json");
  absl::Status status = env->CreateDirs(dir);
  if (status.ok()) status = WriteStringToFile(env, path, ToJson(), /*sync=*/false);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("writing ", path, ": ", status.message()));
  }
  return absl::OkStatus();
}

}  // namespace granary
