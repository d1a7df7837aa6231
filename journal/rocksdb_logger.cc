#include "journal/rocksdb_logger.h"

#include <cstdio>
#include <utility>

#include "glog/logging.h"

namespace granary {

RocksDbGlogLogger::RocksDbGlogLogger(std::string prefix)
    : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL), prefix_(std::move(prefix)) {}

void RocksDbGlogLogger::Logv(const char* format, va_list ap) {
  Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
}

void RocksDbGlogLogger::Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) {
  const bool verbose = level < rocksdb::InfoLogLevel::WARN_LEVEL;
  if (verbose && !VLOG_IS_ON(1)) return;
  char buffer[1024];
  va_list copy;
  va_copy(copy, ap);
  const int n = std::vsnprintf(buffer, sizeof(buffer), format, copy);
  va_end(copy);
  std::string line;
  if (n >= 0 && static_cast<size_t>(n) >= sizeof(buffer)) {
    line.resize(n + 1);
    va_copy(copy, ap);
    std::vsnprintf(line.data(), line.size(), format, copy);
    va_end(copy);
    line.resize(n);
  } else {
    line = n >= 0 ? std::string(buffer, n) : std::string(format);
  }
  if (verbose) {
    VLOG(1) << prefix_ << line;
  } else if (level == rocksdb::InfoLogLevel::WARN_LEVEL) {
    LOG(WARNING) << prefix_ << line;
  } else {
    LOG(ERROR) << prefix_ << line;
  }
}

}  // namespace granary
