#include "client/equal_share_gate.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace granary {

void EqualShareGate::Learn(const OtherShares& others) {
  if (!others_.has_value()) {
    others_ = others;
    return;
  }
  others_->set_remainder(others.remainder());
  others_->set_num_others(others.num_others());
  others_->set_min_at_least(std::max(others_->min_at_least(), others.min_at_least()));
  others_->set_max_at_least(std::max(others_->max_at_least(), others.max_at_least()));
  others_->set_final(others_->final() || others.final());
  // Final counts are exact: more of them can only lower the least.
  if (others.any_final() && (!others_->any_final() || others.min_final() < others_->min_final())) {
    others_->set_any_final(true);
    others_->set_min_final(others.min_final());
  }
}

EqualShareGate::Action EqualShareGate::Next(bool own_ready, bool own_done) const {
  const bool gated =
      others_.has_value() && others_->num_others() > 0 && others_->remainder() != REMAINDER_UNEVEN;
  if (!gated) {
    if (own_ready) return Action::kDeliver;
    return own_done ? Action::kEnd : Action::kWait;
  }
  if (others_->remainder() == REMAINDER_DROP) {
    if (own_ready) {
      // Below what every other consumer has: within the quota whatever it turns out to be.
      if (delivered_ < others_->min_at_least()) return Action::kDeliver;
      // The others are final and have no more than this consumer delivered, or one of them is
      // final with no more: the quota is met (no consumer delivers more than a final count).
      const bool met =
          others_->final() || (others_->any_final() && delivered_ >= others_->min_final());
      return met ? Action::kDrop : Action::kWait;
    }
    return own_done ? Action::kEnd : Action::kWait;
  }
  // REMAINDER_PAD: own elements first, then padding up to what the others have.
  if (own_ready) return Action::kDeliver;
  if (!own_done) return Action::kWait;
  if (delivered_ + padded_ < others_->max_at_least()) return Action::kPad;
  return others_->final() ? Action::kEnd : Action::kWait;
}

std::string EqualShareGate::Describe() const {
  std::string counts =
      absl::StrCat("delivered ", delivered_, ", dropped ", dropped_, ", padded ", padded_);
  if (!others_.has_value()) {
    return absl::StrCat("equal shares: ", counts, "; nothing known yet of the others");
  }
  absl::string_view name = Remainder_Name(others_->remainder());
  absl::ConsumePrefix(&name, "REMAINDER_");
  const std::string rule = absl::AsciiStrToLower(name);
  return absl::StrCat("equal shares (remainder ", rule, "): ", counts, "; the ",
                      others_->num_others(), " other consumers have at least ",
                      others_->min_at_least(), " to ", others_->max_at_least(),
                      others_->final() ? " (final)" : " (not final)",
                      others_->any_final() && !others_->final()
                          ? absl::StrCat("; the fewest of those final: ", others_->min_final())
                          : "");
}

}  // namespace granary
