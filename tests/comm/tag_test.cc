// File: tests/comm/tag_test.cc
#include "comm/tag.h"

#include <set>

#include "gtest/gtest.h"

namespace comm {
namespace {

TEST(TagTest, FieldsRoundTripAndFitTheTransport) {
  uint64_t tag = TagForStep(CollectiveTagBase(0xabcd, 0x1234), 0x567);
  EXPECT_LE(tag, kMaxTransportTag);
  EXPECT_EQ(TagCommunicatorId(tag), 0xabcdu);
  EXPECT_EQ(TagSequence(tag), 0x1234u);
  EXPECT_EQ(TagStep(tag), 0x567u);
  uint64_t max = TagForStep(CollectiveTagBase(0xffff, 0xffff), 0xfff);
  EXPECT_EQ(max, kMaxTransportTag);
}

TEST(TagTest, SequenceAndStepWrap) {
  EXPECT_EQ(CollectiveTagBase(1, 0x10000), CollectiveTagBase(1, 0));
  EXPECT_EQ(TagForStep(0, 0x1001), TagForStep(0, 1));
}

TEST(TagTest, ChildIdsAreDeterministicDistinctAndNeverReserved) {
  EXPECT_EQ(ChildCommunicatorId(1, 0, 3), ChildCommunicatorId(1, 0, 3));
  std::set<uint32_t> ids;
  for (int color = 0; color < 64; ++color) {
    for (uint32_t split = 0; split < 4; ++split) {
      uint32_t id = ChildCommunicatorId(kWorldCommunicatorId, split, color);
      EXPECT_NE(id, 0u);
      EXPECT_NE(id, kWorldCommunicatorId);
      EXPECT_LE(id, kTagCommunicatorMask);
      ids.insert(id);
    }
  }
  EXPECT_EQ(ids.size(), 256u);  // no collision among these few
}

}  // namespace
}  // namespace comm
