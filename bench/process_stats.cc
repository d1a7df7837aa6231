#include "bench/process_stats.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace granary {
namespace {

std::string ProcPath(pid_t pid, const char* file) {
  return (pid == 0 ? std::string("/proc/self/") : "/proc/" + std::to_string(pid) + "/") + file;
}

// The "NAME:   N kB" line of /proc/PID/status, in bytes; 0 if there is none.
int64_t StatusBytes(pid_t pid, const std::string& name) {
  std::ifstream status(ProcPath(pid, "status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(name, 0) == 0) return std::stoll(line.substr(name.size())) * 1024;
  }
  return 0;
}

}  // namespace

double CpuSecondsOf(pid_t pid) {
  std::ifstream stat(ProcPath(pid, "stat"));
  std::string text;
  if (!std::getline(stat, text)) return 0;
  // Fields after the parenthesized command name: state is field 3; utime, stime are 14, 15.
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double CpuSecondsOfAll(const std::vector<pid_t>& pids) {
  double seconds = 0;
  for (pid_t pid : pids) seconds += CpuSecondsOf(pid);
  return seconds;
}

int64_t PeakRssBytesOf(pid_t pid) { return StatusBytes(pid, "VmHWM:"); }

int64_t RssBytesOf(pid_t pid) { return StatusBytes(pid, "VmRSS:"); }

bool ResetPeakRss(pid_t pid) {
  std::ofstream clear_refs(ProcPath(pid, "clear_refs"));
  clear_refs << "5";
  clear_refs.flush();
  return clear_refs.good();
}

}  // namespace granary
