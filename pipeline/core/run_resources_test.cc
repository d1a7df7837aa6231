#include "pipeline/core/run_resources.h"

#include "gtest/gtest.h"

namespace granary {
namespace {

struct Sink {
  int id = 0;
};
struct Guard {
  int id = 0;
};

TEST(RunResourcesTest, EachTypeHasItsOwnSlot) {
  RunResources resources;
  EXPECT_EQ(resources.Get<Sink>(), nullptr);
  Sink sink{1};
  Guard guard{2};
  resources.Set<Sink>(&sink);
  EXPECT_EQ(resources.Get<Sink>(), &sink);
  EXPECT_EQ(resources.Get<Guard>(), nullptr);
  resources.Set<Guard>(&guard);
  EXPECT_EQ(resources.Get<Guard>(), &guard);
  EXPECT_EQ(resources.Get<Sink>(), &sink);
}

TEST(RunResourcesTest, SetReplacesAndCopiesShareTheLentObjects) {
  RunResources resources;
  Sink first{1};
  Sink second{2};
  resources.Set<Sink>(&first);
  resources.Set<Sink>(&second);
  const RunResources copy = resources;
  EXPECT_EQ(copy.Get<Sink>(), &second);
  resources.Set<Sink>(nullptr);
  EXPECT_EQ(resources.Get<Sink>(), nullptr);
  EXPECT_EQ(copy.Get<Sink>(), &second);
}

}  // namespace
}  // namespace granary
