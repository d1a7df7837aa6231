#include "worker/element_window.h"

#include <cstring>

#include "gtest/gtest.h"

namespace granary {
namespace {

ReplyElement Make(int64_t index, size_t bytes) {
  auto image = BufferPool::Default()->Allocate(bytes);
  EXPECT_TRUE(image.ok());
  return {index, static_cast<uint64_t>(index) * 7, true, *image};
}

std::vector<int64_t> Indices(const std::vector<ReplyElement>& elements) {
  std::vector<int64_t> out;
  for (const ReplyElement& e : elements) out.push_back(e.index);
  return out;
}

TEST(ElementWindowTest, HasRoomBelowItsBoundAndAlwaysWhenEmpty) {
  ElementWindow window(100);
  EXPECT_TRUE(window.HasRoom());
  window.Append(Make(0, 60));
  EXPECT_TRUE(window.HasRoom());
  window.Append(Make(1, 60));
  EXPECT_FALSE(window.HasRoom());
  EXPECT_EQ(window.bytes(), 120);
  window.Acknowledge(2);
  EXPECT_TRUE(window.empty());
  EXPECT_EQ(window.bytes(), 0);
  window.Append(Make(2, 1000));  // Larger than the whole window: goes through alone.
  EXPECT_FALSE(window.HasRoom());
}

TEST(ElementWindowTest, AcknowledgeDropsBelowAndReadIsBoundedButNeverEmpty) {
  ElementWindow window(1 << 20);
  for (int64_t i = 3; i < 8; ++i) window.Append(Make(i, 10));
  window.Acknowledge(5);
  EXPECT_EQ(window.front_index(), 5);
  EXPECT_EQ(window.bytes(), 30);
  EXPECT_EQ(Indices(window.Read(25)), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(Indices(window.Read(1)), (std::vector<int64_t>{5})) << "at least one";
  EXPECT_EQ(Indices(window.Read(1000)), (std::vector<int64_t>{5, 6, 7}));
  // A read shares the images: the window and the reader see the same bytes.
  EXPECT_EQ(window.Read(1)[0].image->data(), window.Read(1)[0].image->data());
  window.Acknowledge(3);  // Below the front: nothing changes.
  EXPECT_EQ(window.front_index(), 5);
  window.Clear();
  EXPECT_TRUE(window.empty());
  EXPECT_TRUE(window.Read(10).empty());
}

// An element read out of the window stays valid after the window drops it (gRPC may still be
// sending it).
TEST(ElementWindowTest, AnElementReadOutlivesItsAcknowledgement) {
  ElementWindow window(1 << 20);
  ReplyElement e = Make(0, 64);
  std::memset(e.image->data(), 0x42, 64);
  window.Append(e);
  e = ReplyElement();
  std::vector<ReplyElement> read = window.Read(100);
  window.Acknowledge(1);
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].image->data()[63], 0x42);
}

}  // namespace
}  // namespace granary
