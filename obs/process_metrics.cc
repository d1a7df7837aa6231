#include "obs/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace granary {
namespace {

struct ProcessUsage {
  double rss_bytes = 0;
  double cpu_seconds = 0;
  double threads = 0;
  double open_fds = 0;
};

ProcessUsage ReadUsage() {
  ProcessUsage usage;
  // /proc/self/stat: fields after the parenthesized command name; utime and stime are fields
  // 14 and 15, num_threads 20, rss (pages) 24 (1-based, man proc(5)).
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> f;
    for (std::string field; fields >> field;) f.push_back(field);
    // f[0] is field 3 (state).
    if (f.size() > 21) {
      const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
      usage.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / ticks;
      usage.threads = std::stod(f[17]);
      usage.rss_bytes = std::stod(f[21]) * static_cast<double>(sysconf(_SC_PAGESIZE));
    }
  }
  if (DIR* fds = opendir("/proc/self/fd")) {
    while (const dirent* entry = readdir(fds)) {
      if (entry->d_name[0] != '.') usage.open_fds += 1;
    }
    closedir(fds);
    usage.open_fds -= 1;  // the directory stream's own descriptor
  }
  return usage;
}

}  // namespace

void AddProcessMetrics(MetricRegistry& registry) {
  registry.AddCollector([](MetricSamples& out) {
    const ProcessUsage usage = ReadUsage();
    out.AddGauge("process_resident_memory_bytes", "Resident memory size in bytes.", {},
                 usage.rss_bytes);
    out.AddCounter("process_cpu_seconds_total", "User and system CPU time spent in seconds.", {},
                   usage.cpu_seconds);
    out.AddGauge("process_threads", "Threads of the process.", {}, usage.threads);
    out.AddGauge("process_open_fds", "Open file descriptors.", {}, usage.open_fds);
  });
}

}  // namespace granary
