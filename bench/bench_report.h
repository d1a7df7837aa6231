// BenchReport: what one benchmark measured, printed as a table and written as
// <--json_dir>/<name>.json (schema in bench/RESULTS.md, "Result files"), with the machine it ran
// on. A series is a sample of repeated measurements (median and spread = max - min are derived);
// a headline is a number the results quote — usually a ratio of two series measured in the same
// run — optionally checked against a target.
//
// Every benchmark's main() is BenchMain, which parses the flags (including --json_dir and --quick,
// defined here) and remembers the command line for the report.
#ifndef GRANARY_BENCH_BENCH_REPORT_H_
#define GRANARY_BENCH_BENCH_REPORT_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"

ABSL_DECLARE_FLAG(std::string, json_dir);
ABSL_DECLARE_FLAG(bool, quick);

namespace granary {

// A benchmark's main(): keeps large allocations in the heap (common/large_allocations.h, as
// every granary process does; the benchmark process is the trainer), parses the command line (absl
// flags), records it for BenchReport and runs `run`; a failure is printed as "<name>: <status>" and
// makes the exit code 1.
int BenchMain(int argc, char** argv, const char* name, const std::function<absl::Status()>& run);

// True under --quick: tiny sizes and one repetition, to check that the benchmark runs and writes
// its report, not to measure.
bool QuickBench();

// What a headline should reach (the benchmark issue's targets).
struct BenchTarget {
  enum class Kind { kNone, kAtLeast, kAtMost };
  Kind kind = Kind::kNone;
  double value = 0;
  static BenchTarget AtLeast(double v) { return {Kind::kAtLeast, v}; }
  static BenchTarget AtMost(double v) { return {Kind::kAtMost, v}; }
  bool MetBy(double measured) const {
    return kind == Kind::kAtLeast ? measured >= value : measured <= value;
  }
};

// Where a series sits on a line plot: line `line`, abscissa `x` (e.g. writers, workers).
struct BenchPoint {
  std::string line;
  double x = 0;
};

class BenchReport {
 public:
  // `name` is the result file's stem; `repetitions` the measured rounds per series.
  BenchReport(std::string name, std::string title, int repetitions);

  // REQUIRES: `samples` non-empty. `point` places the series on a line plot.
  void AddSeries(const std::string& name, const std::string& unit,
                 const std::vector<double>& samples,
                 std::optional<BenchPoint> point = std::nullopt);
  void AddHeadline(const std::string& name, double value, const std::string& unit,
                   BenchTarget target = {});
  void AddNote(const std::string& note);

  // Prints the table to stdout and, with --json_dir, writes the JSON file (creating the
  // directory). An error names the file.
  absl::Status Finish() const;

 private:
  struct Series {
    std::string name, unit;
    std::vector<double> samples;
    std::optional<BenchPoint> point;
  };
  struct Headline {
    std::string name, unit;
    double value;
    BenchTarget target;
  };
  std::string ToJson() const;

  std::string name_, title_;
  int repetitions_;
  std::vector<Series> series_;
  std::vector<Headline> headlines_;
  std::vector<std::string> notes_;
};

}  // namespace granary

#endif  // GRANARY_BENCH_BENCH_REPORT_H_
