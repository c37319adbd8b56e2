// File: comm/ring_schedule.h
//
// Pure rank and chunk arithmetic for the collectives: no transport, no state,
// tested on its own (tests/comm/ring_schedule_test.cc).
//
// Chunks. A count that does not divide by the group size n is ceil-split:
// every chunk holds ceil(count / n) elements except the last ones, which are
// shorter or empty. E.g. count 7, n 3: chunks of 3, 3, 1; count 2, n 4:
// 1, 1, 0, 0. This is the split comm/communicator.h promises for
// reduce-scatter.
//
// Ring. Rank r sends to r+1 and receives from r-1 (mod n).
//   all-gather, step k = 0..n-2: sends chunk r-k, receives chunk r-k-1.
//     After step k rank r holds chunks r-k-1 .. r (k+2 of them).
//   reduce-scatter, step k = 0..n-2: sends chunk r-k-1 (its own contribution
//     at step 0, else the partial sum it received and reduced at step k-1),
//     receives chunk r-k-2 and adds its own contribution. At step n-2 it
//     receives chunk r: fully reduced, in the order r+1, r+2, ..., r.
//   In both, the chunk sent at step k is the one received at step k-1, which
//   is what lets segments be forwarded as soon as they arrive.
//
// Segments. A message of more than max_segment_bytes is cut into segments of
// at most that many bytes, cut on element boundaries.
#ifndef COMM_RING_SCHEDULE_H_
#define COMM_RING_SCHEDULE_H_

#include <algorithm>
#include <cstddef>

namespace comm {

struct ElementRange {
  size_t offset = 0;  // first element
  size_t count = 0;   // number of elements
};

inline int PositiveMod(int value, int n) {
  int m = value % n;
  return m < 0 ? m + n : m;
}

// Elements per chunk when `count` is ceil-split into `n` chunks.
inline size_t CeilChunkCount(size_t count, int n) {
  return (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
}

// Chunk `chunk` (0 <= chunk < n) of the ceil-split of `count` elements.
inline ElementRange CeilSplitChunk(size_t count, int n, int chunk) {
  size_t per_chunk = CeilChunkCount(count, n);
  size_t begin = std::min(count, per_chunk * static_cast<size_t>(chunk));
  size_t end = std::min(count, begin + per_chunk);
  return {begin, end - begin};
}

inline int RingRightNeighbor(int rank, int n) { return PositiveMod(rank + 1, n); }
inline int RingLeftNeighbor(int rank, int n) { return PositiveMod(rank - 1, n); }

inline int RingAllGatherSendChunk(int rank, int n, int step) {
  return PositiveMod(rank - step, n);
}
inline int RingAllGatherRecvChunk(int rank, int n, int step) {
  return PositiveMod(rank - step - 1, n);
}
inline int RingReduceScatterSendChunk(int rank, int n, int step) {
  return PositiveMod(rank - step - 1, n);
}
inline int RingReduceScatterRecvChunk(int rank, int n, int step) {
  return PositiveMod(rank - step - 2, n);
}

// Elements per segment: at least one, at most max_segment_bytes worth.
inline size_t SegmentElements(size_t max_segment_bytes, size_t element_size) {
  return std::max<size_t>(1, max_segment_bytes / element_size);
}

// Number of segments of `count` elements (0 for 0 elements).
inline size_t SegmentCount(size_t count, size_t segment_elements) {
  return (count + segment_elements - 1) / segment_elements;
}

// Segment `segment` of a message of `count` elements, relative to its start.
inline ElementRange SegmentOf(size_t count, size_t segment_elements, size_t segment) {
  size_t begin = std::min(count, segment * segment_elements);
  size_t end = std::min(count, begin + segment_elements);
  return {begin, end - begin};
}

// Recursive doubling: the largest power of two <= n.
inline int LargestPowerOfTwoAtMost(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace comm

#endif  // COMM_RING_SCHEDULE_H_
