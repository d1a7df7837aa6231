#include "pipeline/core/row_destination.h"

namespace granary {
namespace {

thread_local std::vector<RowDestination>* current_destinations = nullptr;

}  // namespace

ScopedRowDestinations::ScopedRowDestinations(std::vector<RowDestination>* destinations)
    : previous_(current_destinations) {
  current_destinations = destinations;
}

ScopedRowDestinations::~ScopedRowDestinations() { current_destinations = previous_; }

RowDestination* ScopedRowDestinations::Claim(DataType dtype, const std::vector<int64_t>& shape) {
  if (current_destinations == nullptr) return nullptr;
  for (RowDestination& d : *current_destinations) {
    if (!d.claimed && d.dtype == dtype && d.shape == shape) {
      d.claimed = true;
      return &d;
    }
  }
  return nullptr;
}

bool ScopedRowDestinations::IsClaimedDestination(const void* data) {
  if (current_destinations == nullptr) return false;
  for (const RowDestination& d : *current_destinations) {
    if (d.claimed && d.data == data) return true;
  }
  return false;
}

}  // namespace granary
