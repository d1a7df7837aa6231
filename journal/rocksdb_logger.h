// RocksDbGlogLogger: RocksDB's informational log, sent to glog instead of a `LOG` file.
//
// RocksDB writes its info log (`LOG` in the journal directory) through a file writer that, once
// a write failed (e.g. the disk is full), hits an assertion on its next line — in Debian's
// build, which keeps assertions: the dispatcher died with SIGABRT on a full disk (issue 13,
// defect 6). The journal therefore gives RocksDB this logger: WARN and above go to glog's
// WARNING / ERROR, INFO and DEBUG to VLOG(1) (`--v=1` shows them). It writes nothing to the
// journal's disk.
//
// Thread-safe (glog is).
#ifndef GRANARY_JOURNAL_ROCKSDB_LOGGER_H_
#define GRANARY_JOURNAL_ROCKSDB_LOGGER_H_

#include <cstdarg>
#include <string>

#include "rocksdb/env.h"

namespace granary {

class RocksDbGlogLogger : public rocksdb::Logger {
 public:
  // `prefix` starts every line, e.g. "rocksdb /var/granary/journal: ".
  explicit RocksDbGlogLogger(std::string prefix);

  void Logv(const char* format, va_list ap) override;
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override;

 private:
  const std::string prefix_;
};

}  // namespace granary

#endif  // GRANARY_JOURNAL_ROCKSDB_LOGGER_H_
