// File: comm/tag.h
//
// The one bit layout of the 44-bit transport tag (comm/transport.h), so that
// collectives running concurrently, on one communicator or on several that
// share a transport, never match each other's messages:
//
//   bit 43            28 27            12 11         0
//      +----------------+----------------+------------+
//      | communicator id| sequence number|    step    |
//      |    16 bits     |    16 bits     |  12 bits   |
//      +----------------+----------------+------------+
//
// - communicator id: the world communicator is 1; a child made by Split()
//   gets an id derived from (parent id, split sequence number, color) that
//   every member computes alone (ChildCommunicatorId), so no message is
//   needed to agree on it. 0 is never used, so a zero tag is never valid.
// - sequence number: counts the collectives posted on one communicator
//   (Split included), modulo 2^16. Ranks post collectives in the same order,
//   so the same collective gets the same number everywhere. It wraps, which is
//   safe while fewer than 65536 collectives of one communicator are in flight.
// - step: the algorithm's step (ring step, tree round, ...), modulo 2^12.
//   Within one collective and one step, the segments between one pair of
//   ranks share a tag: the transport delivers them in posting order, and both
//   sides post them in the same order.
//
// Ids of children are hashed into 16 bits, so two unrelated communicators
// sharing a transport collide with probability about 2^-16 per pair; the
// collision only matters if both have collectives in flight with equal
// sequence numbers between the same pair of ranks.
#ifndef COMM_TAG_H_
#define COMM_TAG_H_

#include <cstdint>

#include "comm/transport.h"

namespace comm {

inline constexpr int kTagStepBits = 12;
inline constexpr int kTagSequenceBits = 16;
inline constexpr int kTagCommunicatorBits = 16;
static_assert(kTagStepBits + kTagSequenceBits + kTagCommunicatorBits == kTransportTagBits,
              "the tag fields must fill exactly the transport's tag bits");

inline constexpr uint32_t kTagStepMask = (1u << kTagStepBits) - 1;
inline constexpr uint32_t kTagSequenceMask = (1u << kTagSequenceBits) - 1;
inline constexpr uint32_t kTagCommunicatorMask = (1u << kTagCommunicatorBits) - 1;

inline constexpr uint32_t kWorldCommunicatorId = 1;

// The tag of everything one collective sends: its communicator id and
// sequence number, step 0. Add a step with TagForStep.
inline uint64_t CollectiveTagBase(uint32_t communicator_id, uint32_t sequence) {
  return (uint64_t{communicator_id & kTagCommunicatorMask}
          << (kTagSequenceBits + kTagStepBits)) |
         (uint64_t{sequence & kTagSequenceMask} << kTagStepBits);
}

inline uint64_t TagForStep(uint64_t collective_tag_base, int step) {
  return collective_tag_base | (static_cast<uint32_t>(step) & kTagStepMask);
}

inline uint32_t TagCommunicatorId(uint64_t tag) {
  return static_cast<uint32_t>(tag >> (kTagSequenceBits + kTagStepBits)) & kTagCommunicatorMask;
}
inline uint32_t TagSequence(uint64_t tag) {
  return static_cast<uint32_t>(tag >> kTagStepBits) & kTagSequenceMask;
}
inline uint32_t TagStep(uint64_t tag) { return static_cast<uint32_t>(tag) & kTagStepMask; }

// The id of the child that Split() number `split_sequence` of communicator
// `parent_id` makes for `color`. A deterministic mix (splitmix64 finalizer)
// folded into 16 bits; never 0 and never the world id.
inline uint32_t ChildCommunicatorId(uint32_t parent_id, uint32_t split_sequence, int color) {
  uint64_t x = (uint64_t{parent_id} << 48) ^ (uint64_t{split_sequence} << 32) ^
               static_cast<uint32_t>(color);
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  uint32_t id = static_cast<uint32_t>(x ^ (x >> 16) ^ (x >> 32) ^ (x >> 48)) & kTagCommunicatorMask;
  if (id == 0 || id == kWorldCommunicatorId) id += 2;
  return id;
}

}  // namespace comm

#endif  // COMM_TAG_H_
