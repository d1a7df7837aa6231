// Summaries of repeated measurements, as every benchmark reports them: the median (what is
// quoted), a tail quantile (of latencies), and the spread (max - min, how noisy the machine
// was). REQUIRES: a non-empty sample.
#ifndef GRANARY_BENCH_SAMPLE_STATS_H_
#define GRANARY_BENCH_SAMPLE_STATS_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace granary {

inline double Median(std::vector<double> sample) {
  std::sort(sample.begin(), sample.end());
  return sample[sample.size() / 2];
}

// The value at quantile `q` (0..1; 0.99 is the p99) of `sample`, by nearest rank.
inline double Quantile(std::vector<double> sample, double q) {
  std::sort(sample.begin(), sample.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sample.size())));
  return sample[rank == 0 ? 0 : rank - 1];
}

inline double Spread(const std::vector<double>& sample) {
  const auto [lo, hi] = std::minmax_element(sample.begin(), sample.end());
  return *hi - *lo;
}

// Every element times `factor` (a change of unit).
inline std::vector<double> Scaled(std::vector<double> sample, double factor) {
  for (double& v : sample) v *= factor;
  return sample;
}

}  // namespace granary

#endif  // GRANARY_BENCH_SAMPLE_STATS_H_
