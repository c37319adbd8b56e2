// File: base/parallel_for.h
//
// A kernel's work cut into fixed pieces and run on the rank's compute
// threads: the OpenMP team (libgomp) that also runs oneDNN's products, so the
// products and the kernels between them take turns on one set of threads
// instead of two pools competing for the cores.
//
//   base::ParallelFor(n, kPiece, [&](int64_t begin, int64_t end) {
//     GeluForwardPiece(out + begin, inp + begin, end - begin);
//   });
//
// The pieces are [0, piece), [piece, 2 piece), ... and depend on n and piece
// alone, never on the thread count; each runs whole on one thread. A body
// whose result at an index depends only on that index (element-wise, per row)
// therefore gives the same bits at any thread count; a body must not reduce
// across pieces (a sum over rows is split by columns instead).
//
// Threads: the count given to SetParallelThreads, on the thread that gave it
// (the rank's compute thread). Called from any other thread (comm's) or inside
// a parallel region, the body runs once over [0, n) on the caller, as it does
// with one thread and in a build without OpenMP (the ThreadSanitizer build:
// libgomp's barriers are invisible to it).
#ifndef BASE_PARALLEL_FOR_H_
#define BASE_PARALLEL_FOR_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace base {

// Makes the calling thread the compute thread, with `threads` (at least 1)
// threads for ParallelFor.
void SetParallelThreads(int threads);

// The count ParallelFor uses on the compute thread (1 until set).
int ParallelThreads();

// Whether this build runs ParallelFor's pieces on several threads (false
// without OpenMP).
bool ParallelForIsThreaded();

// Inside a ParallelFor body: which of the team's threads runs it, in
// [0, ParallelThreads()); 0 anywhere else. A body that needs a scratch of
// its own takes the one at this index: two pieces that run at once are on
// different threads, and a thread runs its pieces one after another.
int ParallelThreadIndex();

// Runs body(begin, end) over [0, n) in pieces of `piece` elements (the last
// may be shorter), or once over [0, n) when one thread does the work.
void ParallelFor(int64_t n, int64_t piece, absl::FunctionRef<void(int64_t, int64_t)> body);

}  // namespace base

#endif  // BASE_PARALLEL_FOR_H_
