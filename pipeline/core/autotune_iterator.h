// The iterator that tunes a pipeline's stages (autotuner.h): it owns the Autotuner and the
// stages registered with it (destroyed first), passes their elements on unchanged, and counts
// each one for the tuner. Its state is its input's: knob values are not saved (a restored
// pipeline tunes afresh).
#ifndef GRANARY_PIPELINE_CORE_AUTOTUNE_ITERATOR_H_
#define GRANARY_PIPELINE_CORE_AUTOTUNE_ITERATOR_H_

#include <memory>

#include "common/env.h"
#include "pipeline/core/autotuner.h"
#include "pipeline/core/iterator.h"

namespace granary {

class AutotuneIterator : public Iterator {
 public:
  // Outputs are timed on `env`'s clock.
  AutotuneIterator(std::unique_ptr<Autotuner> tuner, std::unique_ptr<Iterator> input, Env* env)
      : tuner_(std::move(tuner)), input_(std::move(input)), env_(env) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override;
  absl::Status Save(StateWriter& writer) override { return input_->Save(writer); }
  absl::Status Restore(const StateReader& reader) override { return input_->Restore(reader); }

  const Autotuner& tuner() const { return *tuner_; }

 private:
  // Declared first: destroyed after the stages, which hold pointers to it.
  const std::unique_ptr<Autotuner> tuner_;
  const std::unique_ptr<Iterator> input_;
  Env* const env_;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_AUTOTUNE_ITERATOR_H_
