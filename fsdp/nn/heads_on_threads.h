// File: fsdp/nn/heads_on_threads.h
//
// Attention's (sequence, head) pairs on the compute threads, for the standard
// and the blocked (flash) attention alike.
//
//   ForEachHead(batch, heads, scratch_slots, [&](int b, int h, int slot) {
//     float* mine = scratch + slot * per_slot_floats;
//     ...  // one head, its products on this thread
//   });
#ifndef FSDP_NN_HEADS_ON_THREADS_H_
#define FSDP_NN_HEADS_ON_THREADS_H_

#include <cstdint>

#include "base/parallel_for.h"
#include "fsdp/nn/matmul.h"

namespace fsdp {

// [Note: heads on the compute threads] The (b, h) heads are independent: each
// reads its own columns of qkv (and of dout) and writes its own probabilities
// and its own columns of the output (or of dqkv). So they run as pieces of
// one head each on the compute threads (base/parallel_for.h), each thread
// with its own scratch slot (the thread's index), and every product of a
// head on one thread: the bits are those of one thread running the heads in
// order, at any thread count. With fewer slots than threads (a caller that
// sized its scratch for one) the heads run in order on the caller, slot 0.
// Before, the heads ran in order and only their products were split over
// the threads: bf16 attention's 12.7 ms per block (B 8, T 256, C 512, H 8,
// forward and backward) stayed serial at 2 threads, most of the step's
// serial part (2026-12-07).
template <typename PerHead>
void ForEachHead(int batch, int heads, int slots, const PerHead& per_head) {
  const int count = batch * heads;
  if (slots < base::ParallelThreads()) {
    for (int bh = 0; bh < count; ++bh) per_head(bh / heads, bh % heads, /*slot=*/0);
    return;
  }
  base::ParallelFor(count, 1, [&](int64_t first, int64_t end) {
    const MatmulThreadsScope one_thread(1);  // on this thread, for its heads
    const int slot = base::ParallelThreadIndex();
    for (int64_t bh = first; bh < end; ++bh) {
      per_head(static_cast<int>(bh / heads), static_cast<int>(bh % heads), slot);
    }
  });
}

}  // namespace fsdp

#endif  // FSDP_NN_HEADS_ON_THREADS_H_
