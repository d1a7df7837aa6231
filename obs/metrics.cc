#include "obs/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace granary {
namespace {

bool ValidName(absl::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

void AtomicAdd(std::atomic<double>& target, double delta) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
  }
}

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  for (const char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}` (empty without labels), with `extra` (the histogram's `le`) last.
std::string RenderLabels(const MetricLabels& labels, absl::string_view extra = {}) {
  if (labels.empty() && extra.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ',';
    absl::StrAppend(&out, labels[i].first, "=\"", EscapeLabelValue(labels[i].second), "\"");
  }
  if (!extra.empty()) absl::StrAppend(&out, labels.empty() ? "" : ",", extra);
  out += '}';
  return out;
}

std::string RenderValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  // The shortest of %.15g..%.17g that reads back as the same double ("0.1", not
  // "0.10000000000000001"): `le` labels are matched as text.
  for (const int digits : {15, 16}) {
    const std::string text = absl::StrFormat("%.*g", digits, value);
    if (std::strtod(text.c_str(), nullptr) == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

void Counter::Add(double delta) {
  DCHECK_GE(delta, 0);
  AtomicAdd(value_, delta);
}

void Gauge::Add(double delta) { AtomicAdd(value_, delta); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {
  for (size_t i = 1; i < upper_bounds_.size(); ++i)
    CHECK_LT(upper_bounds_[i - 1], upper_bounds_[i]);
}

void Histogram::Observe(double value) {
  const size_t bucket =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  absl::MutexLock lock(&mu_);
  ++counts_[bucket];
  ++count_;
  sum_ += value;
}

Histogram::Snapshot Histogram::Take() const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  absl::MutexLock lock(&mu_);
  uint64_t running = 0;
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    running += counts_[i];
    s.cumulative_counts.push_back(running);
  }
  s.count = count_;
  s.sum = sum_;
  return s;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

void MetricSamples::AddCounter(absl::string_view name, absl::string_view help, MetricLabels labels,
                               double value) {
  samples_.push_back(
      {std::string(name), std::string(help), MetricType::kCounter, std::move(labels), value});
}

void MetricSamples::AddGauge(absl::string_view name, absl::string_view help, MetricLabels labels,
                             double value) {
  samples_.push_back(
      {std::string(name), std::string(help), MetricType::kGauge, std::move(labels), value});
}

MetricRegistry::Instrument& MetricRegistry::Find(absl::string_view name, absl::string_view help,
                                                 MetricType type, const MetricLabels& labels) {
  CHECK(ValidName(name)) << "metric name '" << name << "'";
  for (const auto& [label, value] : labels) CHECK(ValidName(label)) << "label '" << label << "'";
  auto [family, added] = families_.try_emplace(std::string(name), Family{type, std::string(help)});
  CHECK(family->second.type == type) << "metric " << name << " registered with two types";
  auto [it, inserted] = instruments_.try_emplace(absl::StrCat(name, RenderLabels(labels)));
  if (inserted) {
    it->second.name = std::string(name);
    it->second.labels = labels;
  }
  return it->second;
}

Counter* MetricRegistry::GetCounter(absl::string_view name, absl::string_view help,
                                    const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Instrument& i = Find(name, help, MetricType::kCounter, labels);
  if (!i.counter) i.counter = std::make_unique<Counter>();
  return i.counter.get();
}

Gauge* MetricRegistry::GetGauge(absl::string_view name, absl::string_view help,
                                const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Instrument& i = Find(name, help, MetricType::kGauge, labels);
  if (!i.gauge) i.gauge = std::make_unique<Gauge>();
  return i.gauge.get();
}

Histogram* MetricRegistry::GetHistogram(absl::string_view name, absl::string_view help,
                                        const std::vector<double>& upper_bounds,
                                        const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Instrument& i = Find(name, help, MetricType::kHistogram, labels);
  if (!i.histogram) i.histogram = std::make_unique<Histogram>(upper_bounds);
  return i.histogram.get();
}

void MetricRegistry::AddCollector(std::function<void(MetricSamples&)> collector) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::string MetricRegistry::RenderText() const {
  std::vector<std::function<void(MetricSamples&)>> collectors;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
  }
  MetricSamples collected;
  for (const auto& collect : collectors) collect(collected);

  // Sample lines per family name.
  std::map<std::string, std::vector<std::string>> lines;
  std::map<std::string, Family> families;
  absl::MutexLock lock(&mu_);
  families.insert(families_.begin(), families_.end());
  for (const MetricSamples::Sample& s : collected.samples_) {
    CHECK(ValidName(s.name)) << "metric name '" << s.name << "'";
    auto [it, inserted] = families.try_emplace(s.name, Family{s.type, s.help});
    CHECK(it->second.type == s.type) << "metric " << s.name << " reported with two types";
    lines[s.name].push_back(
        absl::StrCat(s.name, RenderLabels(s.labels), " ", RenderValue(s.value)));
  }
  for (const auto& [key, i] : instruments_) {
    std::vector<std::string>& out = lines[i.name];
    if (i.counter) {
      out.push_back(absl::StrCat(key, " ", RenderValue(i.counter->value())));
    } else if (i.gauge) {
      out.push_back(absl::StrCat(key, " ", RenderValue(i.gauge->value())));
    } else {
      const Histogram::Snapshot h = i.histogram->Take();
      for (size_t b = 0; b < h.upper_bounds.size(); ++b) {
        out.push_back(absl::StrCat(
            i.name, "_bucket",
            RenderLabels(i.labels, absl::StrCat("le=\"", RenderValue(h.upper_bounds[b]), "\"")),
            " ", h.cumulative_counts[b]));
      }
      out.push_back(
          absl::StrCat(i.name, "_bucket", RenderLabels(i.labels, "le=\"+Inf\""), " ", h.count));
      out.push_back(absl::StrCat(i.name, "_sum", RenderLabels(i.labels), " ", RenderValue(h.sum)));
      out.push_back(absl::StrCat(i.name, "_count", RenderLabels(i.labels), " ", h.count));
    }
  }
  std::string text;
  for (const auto& [name, family] : families) {
    const auto it = lines.find(name);
    if (it == lines.end()) continue;  // registered by a collector that reported nothing now
    absl::StrAppend(&text, "# HELP ", name, " ", EscapeHelp(family.help), "\n# TYPE ", name, " ",
                    TypeName(family.type), "\n");
    for (const std::string& line : it->second) absl::StrAppend(&text, line, "\n");
  }
  return text;
}

}  // namespace granary
