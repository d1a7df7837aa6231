// MetricRegistry: the counters, gauges and histograms a process exports to Prometheus
// (`--metrics_port`, GET /metrics), rendered in the Prometheus text exposition format 0.0.4.
//
// Two ways a value gets in:
//  * instruments: GetCounter/GetGauge/GetHistogram return a stable pointer, owned by the
//    registry, that hot paths update without a lock (atomics);
//  * collectors: functions called at every scrape that report values computed from the
//    process's state then (workers live, cache bytes, RSS), so state has one source of truth.
// Samples of one metric name from instruments and collectors render as one family; the name's
// type and help must agree (the first registration wins; a mismatch is a programming error,
// CHECKed).
//
// Names follow Prometheus' conventions: `granary_<component>_<what>_<unit>`, counters end in
// `_total`. Label values are escaped on rendering.
//
// Thread-safe: instruments may be updated from any thread while another renders.
#ifndef GRANARY_OBS_METRICS_H_
#define GRANARY_OBS_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace granary {

// Label name → value, in the order given (rendered in that order).
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

// A monotonically increasing count.
class Counter {
 public:
  // REQUIRES: delta >= 0.
  void Add(double delta);
  void Increment() { Add(1); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted into cumulative buckets with fixed upper bounds (plus +Inf), with their
// sum and count.
class Histogram {
 public:
  // REQUIRES: `upper_bounds` strictly ascending and finite.
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    // Cumulative: cumulative_counts[i] counts observations <= upper_bounds[i].
    std::vector<uint64_t> cumulative_counts;
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot Take() const;

 private:
  const std::vector<double> upper_bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, not cumulative; last: +Inf
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
};

// Exponential bucket bounds: start, start·factor, …, `count` of them.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// What a collector reports at a scrape.
class MetricSamples {
 public:
  void AddCounter(absl::string_view name, absl::string_view help, MetricLabels labels,
                  double value);
  void AddGauge(absl::string_view name, absl::string_view help, MetricLabels labels, double value);

 private:
  friend class MetricRegistry;
  struct Sample {
    std::string name, help;
    MetricType type;
    MetricLabels labels;
    double value;
  };
  std::vector<Sample> samples_;
};

class MetricRegistry {
 public:
  MetricRegistry() = default;
  MetricRegistry(const MetricRegistry&) = delete;
  MetricRegistry& operator=(const MetricRegistry&) = delete;

  // The instrument of `name` with exactly `labels`, created on first use; the same pointer for
  // the same name and labels. Valid as long as the registry.
  Counter* GetCounter(absl::string_view name, absl::string_view help,
                      const MetricLabels& labels = {});
  Gauge* GetGauge(absl::string_view name, absl::string_view help, const MetricLabels& labels = {});
  // `upper_bounds` is used when the histogram is created.
  Histogram* GetHistogram(absl::string_view name, absl::string_view help,
                          const std::vector<double>& upper_bounds, const MetricLabels& labels = {});

  // Called (in the order added) at every RenderText, outside the registry's lock.
  void AddCollector(std::function<void(MetricSamples&)> collector);

  // Every metric in the text exposition format, families sorted by name.
  std::string RenderText() const;

 private:
  struct Family {
    MetricType type;
    std::string help;
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Family, std::less<>> families_ ABSL_GUARDED_BY(mu_);
  // By name + rendered labels.
  struct Instrument {
    std::string name;
    MetricLabels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  std::map<std::string, Instrument> instruments_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(MetricSamples&)>> collectors_ ABSL_GUARDED_BY(mu_);

  // Registers (or checks the type of) the family of `name`, and returns the instrument of
  // `name` with `labels`, created empty on first use.
  Instrument& Find(absl::string_view name, absl::string_view help, MetricType type,
                   const MetricLabels& labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace granary

#endif  // GRANARY_OBS_METRICS_H_
