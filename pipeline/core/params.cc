#include "pipeline/core/params.h"

#include <map>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace granary {
namespace {

using google::protobuf::Value;

absl::string_view TypeName(ParamType type) {
  switch (type) {
    case ParamType::kInt:
      return "an integer";
    case ParamType::kFloat:
      return "a number";
    case ParamType::kBool:
      return "a boolean";
    case ParamType::kString:
      return "a string";
    case ParamType::kIntList:
      return "a list of integers";
    case ParamType::kFloatList:
      return "a list of numbers";
    case ParamType::kStringList:
      return "a list of strings";
  }
  return "?";
}

std::string Describe(const Value& v) {
  switch (v.kind_case()) {
    case Value::kNullValue:
      return "null";
    case Value::kNumberValue:
      return absl::StrCat("number ", v.number_value());
    case Value::kStringValue:
      return absl::StrCat("string \"", v.string_value(), "\"");
    case Value::kBoolValue:
      return v.bool_value() ? "true" : "false";
    case Value::kStructValue:
      return "an object";
    case Value::kListValue:
      return "a list";
    default:
      return "nothing";
  }
}

bool IsInteger(const Value& v) {
  return v.kind_case() == Value::kNumberValue && std::trunc(v.number_value()) == v.number_value() &&
         std::abs(v.number_value()) < 9.007199254740992e15;
}

bool ListOf(const Value& v, bool (*element_ok)(const Value&)) {
  if (v.kind_case() != Value::kListValue) return false;
  for (const Value& e : v.list_value().values()) {
    if (!element_ok(e)) return false;
  }
  return true;
}

bool Matches(const Value& v, ParamType type) {
  switch (type) {
    case ParamType::kInt:
      return IsInteger(v);
    case ParamType::kFloat:
      return v.kind_case() == Value::kNumberValue;
    case ParamType::kBool:
      return v.kind_case() == Value::kBoolValue;
    case ParamType::kString:
      return v.kind_case() == Value::kStringValue;
    case ParamType::kIntList:
      return ListOf(v, IsInteger);
    case ParamType::kFloatList:
      return ListOf(v, [](const Value& e) { return e.kind_case() == Value::kNumberValue; });
    case ParamType::kStringList:
      return ListOf(v, [](const Value& e) { return e.kind_case() == Value::kStringValue; });
  }
  return false;
}

}  // namespace

absl::StatusOr<Params> Params::Create(const google::protobuf::Struct& values,
                                      const std::vector<ParamSpec>& specs,
                                      absl::string_view owner) {
  Params params;
  params.owner_ = std::string(owner);
  // In name order, so that of several faults the same one is reported every time (a proto
  // map's iteration order is unspecified).
  const std::map<std::string, google::protobuf::Value> sorted(values.fields().begin(),
                                                             values.fields().end());
  for (const auto& [name, value] : sorted) {
    const ParamSpec* spec = nullptr;
    for (const ParamSpec& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      std::vector<std::string> known;
      for (const ParamSpec& s : specs) known.push_back(s.name);
      return absl::InvalidArgumentError(
          absl::StrCat(owner, ": unknown param '", name, "' (known: ",
                       known.empty() ? "none" : absl::StrJoin(known, ", "), ")"));
    }
    if (!Matches(value, spec->type)) {
      return absl::InvalidArgumentError(absl::StrCat(owner, ": param '", name, "' must be ",
                                                     TypeName(spec->type), ", got ",
                                                     Describe(value)));
    }
  }
  for (const ParamSpec& s : specs) {
    if (s.required && !values.fields().contains(s.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(owner, ": missing required param '", s.name, "' (", TypeName(s.type), ")"));
    }
  }
  params.values_ = values;
  return params;
}

const google::protobuf::Value* Params::Find(absl::string_view name) const {
  auto it = values_.fields().find(std::string(name));
  return it == values_.fields().end() ? nullptr : &it->second;
}

bool Params::Has(absl::string_view name) const { return Find(name) != nullptr; }

int64_t Params::GetInt(absl::string_view name, int64_t fallback) const {
  const Value* v = Find(name);
  return v ? static_cast<int64_t>(v->number_value()) : fallback;
}

double Params::GetFloat(absl::string_view name, double fallback) const {
  const Value* v = Find(name);
  return v ? v->number_value() : fallback;
}

bool Params::GetBool(absl::string_view name, bool fallback) const {
  const Value* v = Find(name);
  return v ? v->bool_value() : fallback;
}

std::string Params::GetString(absl::string_view name, std::string fallback) const {
  const Value* v = Find(name);
  return v ? v->string_value() : fallback;
}

std::vector<int64_t> Params::GetIntList(absl::string_view name) const {
  std::vector<int64_t> out;
  if (const Value* v = Find(name)) {
    for (const Value& e : v->list_value().values()) out.push_back(e.number_value());
  }
  return out;
}

std::vector<double> Params::GetFloatList(absl::string_view name) const {
  std::vector<double> out;
  if (const Value* v = Find(name)) {
    for (const Value& e : v->list_value().values()) out.push_back(e.number_value());
  }
  return out;
}

std::vector<std::string> Params::GetStringList(absl::string_view name) const {
  std::vector<std::string> out;
  if (const Value* v = Find(name)) {
    for (const Value& e : v->list_value().values()) out.push_back(e.string_value());
  }
  return out;
}

absl::Status Params::Invalid(absl::string_view name, absl::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat(owner_, ": param '", name, "' ", problem));
}

}  // namespace granary
