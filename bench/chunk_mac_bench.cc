// What checking a cache chunk's MAC costs per byte: the chunk MAC (security/chunk_mac.h,
// AES-256-GMAC) over a 64 MiB chunk of records the size of a cached image, against HMAC-SHA256 of
// the same bytes (the construction it replaced) and against copying them (memory speed).
//
// Each repetition runs every mode over the same chunk, modes interleaved; record sizes are a
// uint8 224×224×3 crop (150 528 bytes) and its float32 form (602 112 bytes). Prints GB/s per
// mode and the chunk MAC's ratios to HMAC-SHA256 and to the copy.
//
//   bench/chunk_mac_bench [--repetitions 7]
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_report.h"
#include "bench/sample_stats.h"
#include "security/capability.h"
#include "security/chunk_mac.h"

ABSL_FLAG(int, repetitions, 7, "Measurements per mode.");

namespace granary {
namespace {

constexpr size_t kChunkBytes = size_t{64} << 20;  // a sealed chunk's size (cache/FORMAT.md)

// GB/s of `run` over `bytes` bytes.
template <typename Run>
double GigabytesPerSecond(size_t bytes, Run run) {
  const absl::Time start = absl::Now();
  run();
  return static_cast<double>(bytes) / absl::ToDoubleSeconds(absl::Now() - start) / 1e9;
}

absl::Status Run() {
  const bool quick = QuickBench();
  const int reps = quick ? 1 : absl::GetFlag(FLAGS_repetitions);
  const size_t chunk_bytes = quick ? (size_t{4} << 20) : kChunkBytes;
  std::string chunk(chunk_bytes, '\0');
  for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<char>(i * 2654435761u >> 24);
  std::string copy(chunk.size(), '\0');
  const ChunkMacKey key =
      ChunkMacKey::Derive(CapabilityKey::FromBytes(std::string(32, 'k')).value());

  BenchReport report("chunk_mac", "Chunk MAC: GB/s over a 64 MiB chunk, one core", reps);
  for (const size_t record_bytes : {size_t{150528}, size_t{602112}}) {
    const size_t records = chunk.size() / record_bytes;
    const size_t bytes = records * record_bytes;
    std::vector<double> gmac, hmac, memcpy_speed;
    std::string sink;
    for (int r = 0; r < reps; ++r) {
      gmac.push_back(GigabytesPerSecond(bytes, [&] {
        ChunkMac mac = ChunkMac::ForNewChunk(key, 1, 0);
        for (size_t k = 0; k < records; ++k) {
          mac.Add(absl::string_view(chunk).substr(k * record_bytes, record_bytes));
        }
        sink = mac.Finish();
      }));
      hmac.push_back(GigabytesPerSecond(bytes, [&] {
        sink = HmacSha256(key.bytes(), absl::string_view(chunk).substr(0, bytes));
      }));
      memcpy_speed.push_back(GigabytesPerSecond(bytes, [&] {
        std::memcpy(copy.data(), chunk.data(), bytes);
        asm volatile("" : : "r"(copy.data()) : "memory");  // Keeps the copy.
      }));
    }
    const std::string records_of = absl::StrCat(record_bytes, "-byte records");
    report.AddSeries(absl::StrCat("chunk MAC (AES-256-GMAC), ", records_of), "GB/s", gmac);
    report.AddSeries(absl::StrCat("HMAC-SHA256, ", records_of), "GB/s", hmac);
    report.AddSeries(absl::StrCat("memcpy, ", records_of), "GB/s", memcpy_speed);
    report.AddHeadline(absl::StrCat("chunk MAC, ", records_of), Median(gmac), "GB/s",
                       BenchTarget::AtLeast(3.0));
    report.AddHeadline(absl::StrCat("chunk MAC / HMAC-SHA256, ", records_of),
                       Median(gmac) / Median(hmac), "x");
    report.AddHeadline(absl::StrCat("chunk MAC / memcpy, ", records_of),
                       Median(gmac) / Median(memcpy_speed), "x");
  }
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "chunk_mac_bench", granary::Run);
}
