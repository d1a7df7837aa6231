// NamedRegistry: the shape shared by the pipeline's registries (OpRegistry in op.h,
// SourceRegistry in source.h, UdfRegistry in udf.h): entries in registration order, unique by
// their name, looked up by name, with errors that name the entry and say where entries come from.
//
// Thread-compatible: register everything first, then share the registry read-only.
#ifndef GRANARY_PIPELINE_CORE_NAMED_REGISTRY_H_
#define GRANARY_PIPELINE_CORE_NAMED_REGISTRY_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace granary {

template <typename Info>
class NamedRegistry {
 public:
  // How errors speak of the entries.
  struct Naming {
    const char* kind;           // "op": "op 'x' is already registered"
    const char* unknown;        // "type": "unknown type 'x'"
    const char* registered_by;  // "ops are registered by RegisterBuiltinOps in …"
  };

  // `name` is the Info's member that names it.
  NamedRegistry(std::string Info::*name, Naming naming) : name_(name), naming_(naming) {}

  // AlreadyExists naming the entry when its name is taken.
  absl::Status Register(Info info) {
    if (Find(info.*name_) != nullptr) {
      return absl::AlreadyExistsError(
          absl::StrCat(naming_.kind, " '", info.*name_, "' is already registered"));
    }
    entries_.push_back(std::move(info));
    return absl::OkStatus();
  }

  // Puts `info` in place of the entry of its name; NotFound when there is none.
  absl::Status Replace(Info info) {
    for (Info& entry : entries_) {
      if (entry.*name_ == info.*name_) {
        entry = std::move(info);
        return absl::OkStatus();
      }
    }
    return absl::NotFoundError(absl::StrCat(naming_.kind, " '", info.*name_, "' is not registered"));
  }

  // nullptr when unknown.
  const Info* Find(const std::string& name) const {
    for (const Info& info : entries_) {
      if (info.*name_ == name) return &info;
    }
    return nullptr;
  }

  // The entry `name`; InvalidArgument naming it, the registered names and where entries are
  // registered when unknown.
  absl::StatusOr<const Info*> Get(const std::string& name) const {
    if (const Info* info = Find(name)) return info;
    return absl::InvalidArgumentError(absl::StrCat("unknown ", naming_.unknown, " '", name,
                                                   "' (known: ", absl::StrJoin(Names(), ", "),
                                                   "; ", naming_.registered_by, ")"));
  }

  // In registration order.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const Info& info : entries_) names.push_back(info.*name_);
    return names;
  }

 private:
  std::string Info::*name_;
  Naming naming_;
  std::vector<Info> entries_;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_NAMED_REGISTRY_H_
