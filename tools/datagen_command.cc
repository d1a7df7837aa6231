// granary datagen imagenet: writes a synthetic ImageNet-style TFRecord dataset of JPEGs.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "obs/progress_line.h"
#include "tools/commands.h"
#include "tools/synthetic_imagenet.h"

ABSL_FLAG(std::string, out, "", "Directory to write the dataset into.");
ABSL_FLAG(int64_t, images, 1000, "Number of images.");
ABSL_FLAG(int64_t, files, 4, "Number of TFRecord files.");
ABSL_FLAG(int64_t, size, 64, "Image side in pixels (images are size x size x 3).");
ABSL_FLAG(uint64_t, datagen_seed, 0, "Seed of the generated content.");

namespace granary {

int DatagenCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "granary datagen imagenet --out DIR --images N --files K --size S [--datagen_seed S]");
  std::vector<char*> args = ParseCommandFlags(argc, argv);
  if (args.size() != 2 || std::string(args[1]) != "imagenet") {
    std::fprintf(stderr, "granary datagen: name the dataset kind: granary datagen imagenet ...\n");
    return 2;
  }
  SyntheticImagenetOptions options;
  options.out_dir = absl::GetFlag(FLAGS_out);
  if (options.out_dir.empty()) {
    std::fprintf(stderr, "granary datagen: --out is required\n");
    return 2;
  }
  options.images = absl::GetFlag(FLAGS_images);
  options.files = absl::GetFlag(FLAGS_files);
  options.size = absl::GetFlag(FLAGS_size);
  options.seed = absl::GetFlag(FLAGS_datagen_seed);
  ProgressLine progress;
  options.progress = [&](int64_t written) {
    progress.Update(absl::StrFormat("datagen: %d of %d images", written, options.images));
  };
  auto paths = WriteSyntheticImagenet(Env::Default(), options);
  progress.Clear();
  if (!paths.ok()) {
    std::fprintf(stderr, "granary datagen: %s\n", std::string(paths.status().message()).c_str());
    return 1;
  }
  std::printf("wrote %lld images of %lldx%lld in %zu files under %s\n",
              static_cast<long long>(options.images), static_cast<long long>(options.size),
              static_cast<long long>(options.size), paths->size(), options.out_dir.c_str());
  return 0;
}

}  // namespace granary
