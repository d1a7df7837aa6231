// Fuzz target: confining a pipeline's paths to data roots (security/data_roots.h). The bytes
// are a path (and a glob pattern) a hostile pipeline could name. Whenever the check accepts
// one, the path the system would open — the bytes up to the first NUL, resolved — lies inside
// the root, and resolving is idempotent.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "fuzz/fuzz_util.h"
#include "security/data_roots.h"

namespace {

// A root under /tmp with a symlink out of it, made once per process and removed at its exit.
struct FuzzRoot {
  FuzzRoot() {
    char dir[] = "/tmp/granary_data_roots_fuzz_XXXXXX";
    if (::mkdtemp(dir) == nullptr) std::abort();
    top = dir;
    const std::string root = top + "/data";
    if (::mkdir(root.c_str(), 0700) != 0 || ::symlink("/etc", (root + "/out").c_str()) != 0) {
      std::abort();
    }
    roots = granary::DataRoots::Create({root}).value();
  }
  ~FuzzRoot() { std::filesystem::remove_all(top); }

  std::string top;
  granary::DataRoots roots;
};

const granary::DataRoots& Roots() {
  static const FuzzRoot root;
  return root.roots;
}

bool Inside(const std::string& resolved, const std::string& root) {
  return resolved == root || absl::StartsWith(resolved, root + "/");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const granary::DataRoots& roots = Roots();
  const std::string& root = roots.roots()[0];
  // Relative inputs are taken relative to the root, as a pipeline's absolute paths would be.
  std::string path(reinterpret_cast<const char*>(data), size);
  if (!absl::StartsWith(path, "/")) path = root + "/" + path;
  const std::string opened(path.c_str());  // what open(2) would see
  if (roots.Check("file", path).ok()) {
    granary::fuzz::Check(Inside(granary::ResolvePath(opened), root),
                         "an accepted path opens inside the root");
  }
  if (roots.CheckPattern("file pattern", path).ok() && opened.find_first_of("*?[") ==
                                                          std::string::npos) {
    granary::fuzz::Check(Inside(granary::ResolvePath(opened), root),
                         "an accepted pattern without wildcards names a path inside the root");
  }
  const std::string resolved = granary::ResolvePath(opened);
  granary::fuzz::Check(granary::ResolvePath(resolved) == resolved, "resolving is idempotent");
  return 0;
}
