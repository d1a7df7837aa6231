#include "pipeline/core/autotuner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace granary {

AutotuneMemo::Progress AutotuneMemo::Get() const {
  absl::MutexLock lock(&mu_);
  return progress_;
}

void AutotuneMemo::Set(Progress progress) {
  absl::MutexLock lock(&mu_);
  progress_ = std::move(progress);
}

Autotuner::Autotuner(AutotuneOptions options, std::shared_ptr<AutotuneMemo> memo)
    : options_(options),
      memo_(std::move(memo)),
      start_(memo_ != nullptr ? memo_->Get() : AutotuneMemo::Progress()) {}

Autotuner::~Autotuner() {
  absl::MutexLock lock(&mu_);
  if (memo_ != nullptr && !knobs_.empty()) memo_->Set(Confirmed());
}

AutotuneMemo::Progress Autotuner::Confirmed() const {
  AutotuneMemo::Progress progress;
  for (const Entry& k : knobs_) progress.values.push_back(k.value);
  if (!done_ && phase_ != Phase::kBaseline) --progress.values[current_];
  progress.next_knob = current_;
  progress.untried_in_pass = untried_in_pass_;
  progress.done = done_;
  return progress;
}

void Autotuner::Register(Knob* knob, KnobKind kind, std::string name) {
  absl::MutexLock lock(&mu_);
  const int max = kind == KnobKind::kThreads ? options_.max_threads : options_.max_buffer;
  const size_t i = knobs_.size();
  const bool resumed = i < start_.values.size();
  const int value = resumed ? std::clamp(start_.values[i], 1, std::max(max, 1)) : 1;
  knob->Set(value);
  knobs_.push_back(Entry{knob, kind, std::move(name), value, max});
  // Go on with the climb the memo holds when it is this pipeline's (the same knobs).
  if (resumed && start_.values.size() == knobs_.size()) {
    current_ = start_.next_knob < knobs_.size() ? start_.next_knob : 0;
    untried_in_pass_ = start_.untried_in_pass;
    done_ = start_.done;
  } else {
    current_ = 0;
    untried_in_pass_ = static_cast<int>(knobs_.size());
    done_ = false;
  }
}

int64_t Autotuner::BudgetedBytes(size_t raised) const {
  int64_t bytes = 0;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    bytes += (knobs_[i].value + (i == raised ? 1 : 0)) * knobs_[i].knob->BytesPerUnit();
  }
  return bytes;
}

bool Autotuner::StartProbe() {
  for (size_t attempts = 0; attempts < knobs_.size() && untried_in_pass_ > 0; ++attempts) {
    Entry& k = knobs_[current_];
    if (k.value < k.max && BudgetedBytes(current_) <= options_.memory_budget_bytes) {
      k.knob->Set(++k.value);
      phase_ = Phase::kSettle;
      return true;
    }
    --untried_in_pass_;
    current_ = (current_ + 1) % knobs_.size();
  }
  return false;
}

void Autotuner::OnOutput(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (done_ || knobs_.empty()) return;
  if (!window_open_) {  // The first output starts the first window.
    window_open_ = true;
    window_start_ = now;
    window_outputs_ = 0;
    return;
  }
  ++window_outputs_;
  const absl::Duration elapsed = now - window_start_;
  if (elapsed < options_.window || window_outputs_ < 4) return;
  const double rate = window_outputs_ / absl::ToDoubleSeconds(elapsed);
  window_start_ = now;
  window_outputs_ = 0;
  switch (phase_) {
    case Phase::kBaseline:
      base_rate_ = rate;
      break;
    case Phase::kSettle:  // The window the stage adjusted in says little: measure the next.
      phase_ = Phase::kProbe;
      return;
    case Phase::kProbe: {
      Entry& k = knobs_[current_];
      if (rate > base_rate_ * (1 + options_.min_gain)) {
        base_rate_ = rate;  // Kept: probe the same knob further, and every knob again.
        untried_in_pass_ = static_cast<int>(knobs_.size());
      } else {
        k.knob->Set(--k.value);
        --untried_in_pass_;
        current_ = (current_ + 1) % knobs_.size();
      }
      break;
    }
  }
  if (StartProbe()) return;
  done_ = true;
  if (memo_ != nullptr) memo_->Set(Confirmed());
}

std::string Autotuner::Describe() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const Entry& k : knobs_) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", k.name, ": ", k.value,
                    k.kind == KnobKind::kThreads ? " threads" : " slots");
  }
  if (!done_ && !knobs_.empty()) absl::StrAppend(&out, " (tuning)");
  return out;
}

std::vector<int> Autotuner::Values() const {
  absl::MutexLock lock(&mu_);
  std::vector<int> values;
  for (const Entry& k : knobs_) values.push_back(k.value);
  return values;
}

bool Autotuner::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

}  // namespace granary
