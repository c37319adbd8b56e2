// File: fsdp/nn/init_rng.h
//
// A counter-based generator for parameter initialization: element i of
// parameter p of unit u under seed s is a pure function of (s, u, p, i), so
// any rank can initialize any unit (or any slice of one) identically, in any
// order, whatever the world size. SplitMix64's finalizer does the mixing;
// Box-Muller turns two uniforms into a normal.
#ifndef FSDP_NN_INIT_RNG_H_
#define FSDP_NN_INIT_RNG_H_

#include <cmath>
#include <cstdint>

#include "absl/types/span.h"

namespace fsdp {

inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The stream key of one parameter.
inline uint64_t InitStreamKey(uint64_t seed, int unit, int param_index) {
  return Mix64(Mix64(seed) ^ Mix64((static_cast<uint64_t>(unit) << 20) ^
                                   static_cast<uint64_t>(param_index) ^ 0xA5A5A5A5ull));
}

// Uniform in (0, 1): 53 random bits, never exactly 0.
inline double CounterUniform(uint64_t key, uint64_t counter) {
  return (static_cast<double>(Mix64(key ^ Mix64(counter)) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal number `counter` of stream `key`.
inline double CounterNormal(uint64_t key, uint64_t counter) {
  const double u1 = CounterUniform(key, 2 * counter);
  const double u2 = CounterUniform(key, 2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// out[i] = stddev * CounterNormal(key, first_counter + i).
inline void FillNormal(absl::Span<float> out, float stddev, uint64_t key,
                       uint64_t first_counter = 0) {
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(stddev * CounterNormal(key, first_counter + i));
  }
}

}  // namespace fsdp

#endif  // FSDP_NN_INIT_RNG_H_
