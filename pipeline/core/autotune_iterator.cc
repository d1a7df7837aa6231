#include "pipeline/core/autotune_iterator.h"

#include "absl/time/time.h"
#include "common/status_macros.h"

namespace granary {

absl::Status AutotuneIterator::GetNext(Element* out, bool* end_of_sequence) {
  RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
  if (!*end_of_sequence) tuner_->OnOutput(absl::FromUnixMicros(env_->NowMicros()));
  return absl::OkStatus();
}

}  // namespace granary
