#include "journal/format.h"

#include "absl/strings/str_cat.h"
#include "common/hash.h"

namespace granary::journal_format {
namespace {

uint64_t Checksum(absl::string_view key, absl::string_view payload) {
  StreamingHash64 hash(/*seed=*/0);
  hash.Update(key);
  hash.Update(payload);
  return hash.Digest();
}

}  // namespace

std::string EncodeU64(uint64_t value) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
  return out;
}

uint64_t DecodeU64(absl::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < 8; ++i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

std::string SeqKey(char prefix, uint64_t seq) {
  return absl::StrCat(std::string(1, prefix), EncodeU64(seq));
}

std::optional<uint64_t> ParseSeqKey(char prefix, absl::string_view key) {
  if (key.size() != kSeqKeySize || key[0] != prefix) return std::nullopt;
  return DecodeU64(key.substr(1));
}

std::string ValueHeader(absl::string_view key, absl::string_view payload) {
  return EncodeU64(Checksum(key, payload));
}

std::string EncodeValue(absl::string_view key, absl::string_view payload) {
  return absl::StrCat(ValueHeader(key, payload), payload);
}

absl::StatusOr<absl::string_view> DecodeValue(absl::string_view key, absl::string_view value) {
  if (value.size() < kChecksumSize) {
    return absl::DataLossError(absl::StrCat(
        "value of ", value.size(), " bytes is shorter than its ", kChecksumSize, "-byte checksum"));
  }
  const absl::string_view payload = value.substr(kChecksumSize);
  if (DecodeU64(value.substr(0, kChecksumSize)) != Checksum(key, payload)) {
    return absl::DataLossError("checksum mismatch");
  }
  return payload;
}

}  // namespace granary::journal_format
