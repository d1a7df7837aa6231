// RunResources: the objects one run of a pipeline lends its iterators by type — what a
// subsystem's op or source needs from whoever runs the pipeline (the cache's CacheSink for
// cache_write and CacheChunkGuard for cache_read, lent by a worker's task run hooks), so that
// the pipeline core knows none of those types. One slot per type; the resources are not owned
// and must outlive the run's iterators.
//
// Thread-compatible: filled before the iterators are built, then only read.
#ifndef GRANARY_PIPELINE_CORE_RUN_RESOURCES_H_
#define GRANARY_PIPELINE_CORE_RUN_RESOURCES_H_

#include <typeindex>
#include <typeinfo>

#include "absl/container/flat_hash_map.h"

namespace granary {

class RunResources {
 public:
  // Lends `resource` as the run's T (null: none), replacing any lent before.
  template <typename T>
  void Set(T* resource) {
    slots_[std::type_index(typeid(T))] = resource;
  }

  // The run's T; null when none was lent.
  template <typename T>
  T* Get() const {
    const auto it = slots_.find(std::type_index(typeid(T)));
    return it == slots_.end() ? nullptr : static_cast<T*>(it->second);
  }

 private:
  absl::flat_hash_map<std::type_index, void*> slots_;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_RUN_RESOURCES_H_
