// StateWriter / StateReader: how iterators Save and Restore their state (DESIGN.md §2).
//
// State is a flat map of hierarchical keys to values, held in an IteratorStateProto. Each
// iterator writes under its own prefix (Child("shuffle")) so nested iterators never collide:
//
//   Status Save(StateWriter& w) {
//     w.WriteInt("consumed", consumed_);
//     StateWriter in = w.Child("input");
//     return input_->Save(in);
//   }
//
// Readers return NotFound naming the full key when it is absent, and InvalidArgument when it
// holds another kind of value. Thread-compatible.
#ifndef GRANARY_PIPELINE_CORE_ITERATOR_STATE_H_
#define GRANARY_PIPELINE_CORE_ITERATOR_STATE_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipeline/core/element.h"
#include "proto/pipeline.pb.h"

namespace granary {

class StateWriter {
 public:
  // Writes into `state`, which must outlive the writer and its children.
  explicit StateWriter(IteratorStateProto* state, std::string prefix = "")
      : state_(state), prefix_(std::move(prefix)) {}

  StateWriter Child(absl::string_view name) const;

  void WriteInt(absl::string_view key, int64_t value);
  void WriteBytes(absl::string_view key, std::string value);
  void WriteElement(absl::string_view key, const Element& element);
  void WriteSplit(absl::string_view key, const Split& split);
  // Writes a sequence of elements (a buffer) under `key`; ReadElements reads it back in order.
  template <typename Container>
  void WriteElements(absl::string_view key, const Container& elements) {
    StateWriter list = Child(key);
    int64_t i = 0;
    for (const Element& e : elements) list.WriteElement(std::to_string(i++), e);
    list.WriteInt("size", i);
  }

 private:
  IteratorStateProto::Value& Slot(absl::string_view key);

  IteratorStateProto* state_;
  std::string prefix_;
};

class StateReader {
 public:
  explicit StateReader(const IteratorStateProto* state, std::string prefix = "")
      : state_(state), prefix_(std::move(prefix)) {}

  StateReader Child(absl::string_view name) const;

  bool Contains(absl::string_view key) const;
  absl::StatusOr<int64_t> ReadInt(absl::string_view key) const;
  absl::StatusOr<std::string> ReadBytes(absl::string_view key) const;
  absl::StatusOr<Element> ReadElement(absl::string_view key) const;
  absl::StatusOr<Split> ReadSplit(absl::string_view key) const;
  absl::StatusOr<std::vector<Element>> ReadElements(absl::string_view key) const;

 private:
  absl::StatusOr<const IteratorStateProto::Value*> Find(absl::string_view key,
                                                        IteratorStateProto::Value::ValueCase want)
      const;

  const IteratorStateProto* state_;
  std::string prefix_;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_ITERATOR_STATE_H_
