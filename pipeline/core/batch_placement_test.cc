#include "pipeline/core/batch_placement.h"

#include "gtest/gtest.h"
#include "pipeline/core/row_destination.h"

namespace granary {
namespace {

Element FloatRow(std::vector<float> values) {
  Element row;
  row.tensors.push_back(Tensor::FromVector<float>({static_cast<int64_t>(values.size())}, values));
  row.tensors.push_back(Tensor::Scalar<int64_t>(static_cast<int64_t>(values[0])));
  return row;
}

// The first row of a batch to finish lays the batch's image out and is copied into its slot;
// a later row's UDF makes its tensor in its slot (through the destinations) and is not copied;
// the batch op takes the image with every row in place.
TEST(BatchPlacementTest, FirstRowLaysOutLaterRowsAreMadeInTheirPlace) {
  BatchPlacement placement(3, BufferPool::Default());
  EXPECT_TRUE(placement.Destinations(4).empty()) << "no row of batch 1 finished yet";
  Element first = FloatRow({4, 4.5});
  placement.Place(4, first);  // Slot 1 of batch 1.
  std::vector<RowDestination> destinations = placement.Destinations(5);
  ASSERT_EQ(destinations.size(), 2u);
  EXPECT_EQ(destinations[0].dtype, DT_FLOAT);
  EXPECT_EQ(destinations[0].shape, std::vector<int64_t>{2});
  Element second;
  {
    ScopedRowDestinations scope(&destinations);
    Tensor made = Tensor::Uninitialized(DT_FLOAT, {2});  // What a UDF's output allocation does.
    EXPECT_EQ(made.content().data(), destinations[0].data);
    made.data<float>()[0] = 5;
    made.data<float>()[1] = 5.5;
    second.tensors.push_back(std::move(made));
    second.tensors.push_back(Tensor::Scalar<int64_t>(5));  // Scalars are small: not matched.
  }
  const char* const made_at = second.tensors[0].content().data();
  placement.Place(5, second);
  EXPECT_EQ(second.tensors[0].content().data(), made_at) << "a row made in place is not copied";
  Element third = FloatRow({3, 3.5});
  placement.Place(3, third);

  std::optional<BatchPlacement::Placed> placed = placement.Take(1);
  ASSERT_TRUE(placed.has_value());
  ASSERT_EQ(placed->specs.size(), 2u);
  EXPECT_EQ(placed->specs[0].shape, (std::vector<int64_t>{3, 2}));
  const ImageLayout layout(placed->specs, 0, 0);
  const float* images = reinterpret_cast<const float*>(placed->image->data() + layout.content_offset(0));
  const int64_t* labels =
      reinterpret_cast<const int64_t*>(placed->image->data() + layout.content_offset(1));
  EXPECT_EQ(std::vector<float>(images, images + 6), (std::vector<float>{3, 3.5, 4, 4.5, 5, 5.5}));
  EXPECT_EQ(std::vector<int64_t>(labels, labels + 3), (std::vector<int64_t>{3, 4, 5}));
  for (const Element* row : {&third, &first, &second}) {
    EXPECT_GE(row->tensors[0].content().data(), placed->image->data());
    EXPECT_LT(row->tensors[0].content().data(), placed->image->data() + placed->image->size());
  }
  EXPECT_FALSE(placement.Take(1).has_value()) << "taken once";
}

// Before any row of a batch has finished, its rows are made in place on the guess that it is
// shaped like the batch before; a row that proves the guess wrong is left to the batch op.
TEST(BatchPlacementTest, LaterBatchesAreLaidOutLikeThePreviousOne) {
  BatchPlacement placement(2, BufferPool::Default());
  Element first = FloatRow({1, 1});
  placement.Place(0, first);
  std::vector<RowDestination> guessed = placement.Destinations(2);  // Batch 1: nothing finished.
  ASSERT_EQ(guessed.size(), 2u);
  EXPECT_EQ(guessed[0].shape, std::vector<int64_t>{2});
  Element wider = FloatRow({1, 2, 3});
  const char* wider_at = wider.tensors[0].content().data();
  placement.Place(3, wider);  // Batch 1, laid out for rows of 2 floats.
  EXPECT_EQ(wider.tensors[0].content().data(), wider_at);
  Element fits = FloatRow({5, 6});
  placement.Place(2, fits);
  EXPECT_EQ(fits.tensors[0].content().data(), guessed[0].data);
}

TEST(BatchPlacementTest, RowsThatCannotBePlacedAreLeftAsTheyAre) {
  BatchPlacement placement(2, BufferPool::Default());
  Element first = FloatRow({1, 1});
  placement.Place(0, first);
  // Another shape, strings, and a row of a batch already taken.
  Element wider = FloatRow({1, 2, 3});
  const char* wider_at = wider.tensors[0].content().data();
  placement.Place(1, wider);
  EXPECT_EQ(wider.tensors[0].content().data(), wider_at);
  Element strings;
  strings.tensors.push_back(Tensor::String("x"));
  placement.Place(1, strings);
  EXPECT_EQ(strings.tensors[0].strings()[0], "x");
  ASSERT_TRUE(placement.Take(0).has_value());
  Element late = FloatRow({2, 2});
  const char* late_at = late.tensors[0].content().data();
  placement.Place(1, late);
  EXPECT_EQ(late.tensors[0].content().data(), late_at);
  EXPECT_TRUE(placement.Destinations(1).empty());
}

// A UDF that put one tensor in another tensor's place: copying one would overwrite the other,
// so the row is left to the batch op's copy.
TEST(BatchPlacementTest, TensorsInEachOthersPlaceAreLeftAsTheyAre) {
  BatchPlacement placement(2, BufferPool::Default());
  Element first;
  first.tensors.push_back(Tensor::FromVector<float>({2}, {1, 2}));
  first.tensors.push_back(Tensor::FromVector<float>({2}, {3, 4}));
  placement.Place(0, first);
  std::vector<RowDestination> destinations = placement.Destinations(1);
  ASSERT_EQ(destinations.size(), 2u);
  Element swapped;
  {
    ScopedRowDestinations scope(&destinations);
    Tensor a = Tensor::Uninitialized(DT_FLOAT, {2});  // Claims tensor 0's place.
    Tensor b = Tensor::Uninitialized(DT_FLOAT, {2});  // Claims tensor 1's place.
    a.data<float>()[0] = 10;
    b.data<float>()[0] = 20;
    swapped.tensors.push_back(std::move(b));
    swapped.tensors.push_back(std::move(a));
  }
  placement.Place(1, swapped);
  EXPECT_EQ(swapped.tensors[0].data<float>()[0], 20);
  EXPECT_EQ(swapped.tensors[1].data<float>()[0], 10);
  EXPECT_EQ(swapped.tensors[0].content().data(), destinations[1].data);
}

}  // namespace
}  // namespace granary
