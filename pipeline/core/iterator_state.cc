#include "pipeline/core/iterator_state.h"

#include "absl/strings/str_cat.h"

namespace granary {
namespace {

std::string Join(const std::string& prefix, absl::string_view name) {
  return prefix.empty() ? std::string(name) : absl::StrCat(prefix, ".", name);
}

}  // namespace

StateWriter StateWriter::Child(absl::string_view name) const {
  return StateWriter(state_, Join(prefix_, name));
}

IteratorStateProto::Value& StateWriter::Slot(absl::string_view key) {
  return (*state_->mutable_entries())[Join(prefix_, key)];
}

void StateWriter::WriteInt(absl::string_view key, int64_t value) {
  Slot(key).set_int_value(value);
}

void StateWriter::WriteBytes(absl::string_view key, std::string value) {
  Slot(key).set_bytes_value(std::move(value));
}

void StateWriter::WriteElement(absl::string_view key, const Element& element) {
  element.ToProto(Slot(key).mutable_element());
}

void StateWriter::WriteSplit(absl::string_view key, const Split& split) {
  *Slot(key).mutable_split() = split;
}

StateReader StateReader::Child(absl::string_view name) const {
  return StateReader(state_, Join(prefix_, name));
}

bool StateReader::Contains(absl::string_view key) const {
  return state_->entries().contains(Join(prefix_, key));
}

absl::StatusOr<const IteratorStateProto::Value*> StateReader::Find(
    absl::string_view key, IteratorStateProto::Value::ValueCase want) const {
  const std::string full = Join(prefix_, key);
  auto it = state_->entries().find(full);
  if (it == state_->entries().end()) {
    return absl::NotFoundError(absl::StrCat("iterator state has no key '", full, "'"));
  }
  if (it->second.value_case() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("iterator state key '", full, "' holds another kind of value"));
  }
  return &it->second;
}

absl::StatusOr<int64_t> StateReader::ReadInt(absl::string_view key) const {
  auto value = Find(key, IteratorStateProto::Value::kIntValue);
  if (!value.ok()) return value.status();
  return (*value)->int_value();
}

absl::StatusOr<std::string> StateReader::ReadBytes(absl::string_view key) const {
  auto value = Find(key, IteratorStateProto::Value::kBytesValue);
  if (!value.ok()) return value.status();
  return (*value)->bytes_value();
}

absl::StatusOr<Element> StateReader::ReadElement(absl::string_view key) const {
  auto value = Find(key, IteratorStateProto::Value::kElement);
  if (!value.ok()) return value.status();
  return Element::FromProto((*value)->element());
}

absl::StatusOr<Split> StateReader::ReadSplit(absl::string_view key) const {
  auto value = Find(key, IteratorStateProto::Value::kSplit);
  if (!value.ok()) return value.status();
  return (*value)->split();
}

absl::StatusOr<std::vector<Element>> StateReader::ReadElements(absl::string_view key) const {
  const StateReader list = Child(key);
  auto size = list.ReadInt("size");
  if (!size.ok()) return size.status();
  std::vector<Element> elements;
  elements.reserve(*size);
  for (int64_t i = 0; i < *size; ++i) {
    auto e = list.ReadElement(std::to_string(i));
    if (!e.ok()) return e.status();
    elements.push_back(std::move(e).value());
  }
  return elements;
}

}  // namespace granary
