// NormalizeKernel: the arithmetic of the normalize UDF — (x * scale - mean[c]) / std[c] in
// float32 for each value x of channel c — over a run of pixels, with no tensor, element or
// registry around it. The normalize UDF (pipeline/udfs/udf_normalize.cc) runs it on a worker and
// a trainer's client runs it on the pipeline's trainer-side tail (pipeline/trainer_tail.h): one
// implementation, so both give identical bytes.
//
// The formula is evaluated exactly as written (this file's .cc is compiled without floating-point
// contraction: no fused multiply-subtract), for uint8 input four values at a time with SSE2 where
// the channel count divides 12, else through a per-channel table of all 256 results — the same
// operations in the same order, so a uint8 image and the same image cast to float32 normalize to
// identical bytes. Depends on nothing but the standard library. Thread-safe (const).
#ifndef GRANARY_PIPELINE_KERNELS_NORMALIZE_KERNEL_H_
#define GRANARY_PIPELINE_KERNELS_NORMALIZE_KERNEL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace granary {

// What a trainer's client runs of a pipeline's trainer-side tail (pipeline/trainer_tail.h), at
// most: a worker keeps a longer tail, or wider lists (each value is a table of 256 floats), itself.
inline constexpr int kMaxTrainerTailSteps = 64;
inline constexpr int kMaxTrainerTailChannelValues = 1024;

class NormalizeKernel {
 public:
  // `mean` and `std`: one value for every channel, or one per channel (then of equal length).
  // REQUIRES: both non-empty, std entries non-zero.
  NormalizeKernel(float scale, std::vector<float> mean, std::vector<float> std);

  // Whether an image of `channels` channels fits the lists (each has one value or `channels`).
  bool FitsChannels(int64_t channels) const {
    return (mean_.size() == 1 || static_cast<int64_t>(mean_.size()) == channels) &&
           (std_.size() == 1 || static_cast<int64_t>(std_.size()) == channels);
  }
  size_t mean_size() const { return mean_.size(); }
  size_t std_size() const { return std_.size(); }

  // out[p * channels + c] = formula(in[p * channels + c], c) for `pixels` pixels. `stream`:
  // write `out` with streaming stores (it is read next by another core or much later).
  // REQUIRES: FitsChannels(channels).
  void FromUint8(const uint8_t* in, int64_t pixels, int64_t channels, float* out,
                 bool stream) const;
  // The same, in place over float32 values.
  void InPlace(float* x, int64_t pixels, int64_t channels) const;

 private:
  // Values per vector step: a multiple of every channel count the vector path serves (1, 2, 3,
  // 4, 6), so each step's per-lane means and stds are the same.
  static constexpr int kStep = 12;

  // The uint8 table of channel c.
  const float* Table(int64_t c) const {
    return lut_.size() == 256 ? lut_.data() : lut_.data() + c * 256;
  }
  // Normalizes in[0..k) into out[0..k), k a multiple of kStep: every step while its 16-byte
  // load stays within in[0..n). Returns k (0 without SSE2).
  int64_t FromUint8Vector(const uint8_t* in, int64_t n, float* out, bool stream) const;
  // The formula for channel c (lists of one value apply to every channel).
  float Mean(size_t c) const { return mean_.size() == 1 ? mean_[0] : mean_[c]; }
  float Std(size_t c) const { return std_.size() == 1 ? std_[0] : std_[c]; }
  float Apply(float x, size_t c) const { return (x * scale_ - Mean(c)) / Std(c); }

  const float scale_;
  const std::vector<float> mean_;
  const std::vector<float> std_;
  std::vector<float> lut_;
  // The vector path: whether the lists' length divides kStep, and each lane's mean and std.
  bool vector_path_ = false;
  float step_mean_[kStep];
  float step_std_[kStep];
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_KERNELS_NORMALIZE_KERNEL_H_
