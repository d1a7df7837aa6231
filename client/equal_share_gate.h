// EqualShareGate: one consumer's half of equal shares (DESIGN.md §6, "Consumers and shares").
// In an equal-shares epoch every consumer reads its own share of the plan; the gate decides,
// before each element the reader would hand to the trainer, whether to deliver it, drop it, hand
// out padding instead, wait, or end the epoch — so that every consumer delivers the same number
// of elements, by the job's Remainder rule:
//  * REMAINDER_DROP: an element is delivered only while fewer have been delivered than every
//    other consumer is known to have (OtherShares.min_at_least); once the others are final — or
//    one of them is final with no more than this consumer delivered (OtherShares.min_final) —
//    the rest are read and dropped. Each consumer delivers min over consumers of their counts.
//    (Waiting for all to be final deadlocked two consumers each holding the other back: granary
//    chaos --scenario equal_shares --seed 9 under load.)
//  * REMAINDER_PAD: every own element is delivered; then padding (copies of the last one) until
//    the consumer has delivered as many as the others are known to have, and the epoch ends once
//    they are final. Each consumer delivers max over consumers of their counts.
//  * REMAINDER_UNEVEN, a dynamic epoch, or a consumer alone (no OtherShares, or num_others 0):
//    the gate never holds anything back.
// What the others are known to have comes from the dispatcher's lower bounds, which grow as their
// workers produce: a consumer waits only for what the others' workers have not produced yet, so
// a slow trainer holds the fast ones back by no more than its workers' buffering.
//
// Exactly once: an own element is either delivered or dropped, never both, and the counts are
// part of the saved position (ClientPosition.dropped, .padded), so a resumed consumer goes on
// with the same totals.
//
// Thread-compatible.
#ifndef GRANARY_CLIENT_EQUAL_SHARE_GATE_H_
#define GRANARY_CLIENT_EQUAL_SHARE_GATE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "proto/dispatcher.pb.h"

namespace granary {

class EqualShareGate {
 public:
  enum class Action {
    kDeliver,  // hand the next own element to the trainer
    kDrop,     // read the next own element and count it dropped
    kPad,      // hand out a padding element
    kWait,     // nothing yet: wait for an own element or news of the others
    kEnd,      // the consumer's epoch is over
  };

  // A gate for a consumer at the start of its epoch: nothing delivered, dropped or padded yet.
  EqualShareGate() = default;

  // A consumer resumed from a saved position (ClientPosition): it has delivered `delivered` own
  // elements, dropped `dropped` and handed out `padded` padding elements so far in the epoch.
  // What the gate has learned of the others stays (the reader learns before it reads the
  // position).
  void Resume(int64_t delivered, int64_t dropped, int64_t padded) {
    delivered_ = delivered;
    dropped_ = dropped;
    padded_ = padded;
  }

  // News of the other consumers from a heartbeat. Their lower bounds only grow: a smaller one
  // (from a restarted dispatcher, which counts again) changes nothing.
  void Learn(const OtherShares& others);

  // What to do next, given whether an own element is ready (`own_ready`) and whether the
  // consumer's own elements are all taken (`own_done`: every task done, the task set final).
  Action Next(bool own_ready, bool own_done) const;

  // For a stall message: what the gate knows, e.g. "equal shares (remainder drop): delivered
  // 12, dropped 0, padded 0; the 1 other consumers have at least 12 to 12 (not final)".
  std::string Describe() const;

  void Delivered() { ++delivered_; }
  void Dropped() { ++dropped_; }
  void Padded() { ++padded_; }

  int64_t delivered() const { return delivered_; }
  int64_t dropped() const { return dropped_; }
  int64_t padded() const { return padded_; }
  // The epoch's remainder rule, once a heartbeat said (equal shares only).
  std::optional<Remainder> remainder() const {
    if (!others_.has_value()) return std::nullopt;
    return others_->remainder();
  }

 private:
  int64_t delivered_ = 0;
  int64_t dropped_ = 0;
  int64_t padded_ = 0;
  std::optional<OtherShares> others_;
};

}  // namespace granary

#endif  // GRANARY_CLIENT_EQUAL_SHARE_GATE_H_
