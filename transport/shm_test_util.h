// For tests of the shared-memory transport: what /dev/shm holds, to check that nothing is ever
// left there (the transport's segments are memfds, which never appear in it).
#ifndef GRANARY_TRANSPORT_SHM_TEST_UTIL_H_
#define GRANARY_TRANSPORT_SHM_TEST_UTIL_H_

#include <dirent.h>

#include <set>
#include <string>

namespace granary::testing {

// The names in /dev/shm (empty if there is no such directory).
inline std::set<std::string> DevShmEntries() {
  std::set<std::string> names;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(dir)) names.insert(e->d_name);
    ::closedir(dir);
  }
  return names;
}

}  // namespace granary::testing

#endif  // GRANARY_TRANSPORT_SHM_TEST_UTIL_H_
