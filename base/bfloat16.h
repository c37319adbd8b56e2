// File: base/bfloat16.h
//
// bf16, the top 16 bits of an IEEE fp32 (sign, 8-bit exponent, 7-bit
// mantissa): the value type and its scalar conversions, the one definition
// of the rounding every path in comm/ and fsdp/ reproduces (the bulk and
// vector ones in base/bf16_convert.h and base/bf16_avx512.h).
//
//   const base::Bf16 h = base::Bf16::FromFloat(0.1f);  // rounded: 0x3dcd
//   float back = h.ToFloat();                           // 0.10009765625f, exact
//
// Arrays of bf16 are held as their bits (uint16_t), which the kernels and
// the collectives read and write; ToBf16Bits / FromBf16Bits are the same
// conversions on bits. Naming: "ToBf16" rounds fp32 to bf16, "FromBf16"
// widens bf16 to fp32, for one value or (base/bf16_convert.h) an array.
//
// Rounding is to nearest, ties to even, on the 16 bits dropped; a NaN stays
// a NaN with its top half kept and the quiet bit set; infinities and values
// that round past the largest finite bf16 become infinity. Widening is exact.
#ifndef BASE_BFLOAT16_H_
#define BASE_BFLOAT16_H_

#include <cstdint>
#include <type_traits>

namespace base {

// Written branch-free on integers and always inlined, so the loops that call
// it (comm's reductions, the scalar tails of the bulk paths) vectorize.
inline __attribute__((always_inline)) uint16_t ToBf16Bits(float value) {
  uint32_t bits;
  __builtin_memcpy(&bits, &value, sizeof(bits));
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  const bool is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

inline __attribute__((always_inline)) float FromBf16Bits(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  __builtin_memcpy(&result, &bits, sizeof(result));
  return result;
}

// One bf16 value. Trivially copyable and 2 bytes, so an array of them is an
// array of bits; no implicit conversion either way.
struct Bf16 {
  uint16_t bits;

  static Bf16 FromBits(uint16_t bits) { return Bf16{bits}; }
  // Rounds to nearest even (NaN kept a NaN, quiet).
  static Bf16 FromFloat(float value) { return Bf16{ToBf16Bits(value)}; }
  // Exact.
  float ToFloat() const { return FromBf16Bits(bits); }

  // Bitwise: +0 and -0 differ, a NaN equals the same NaN.
  friend bool operator==(Bf16 a, Bf16 b) { return a.bits == b.bits; }
  friend bool operator!=(Bf16 a, Bf16 b) { return a.bits != b.bits; }
};
static_assert(sizeof(Bf16) == 2, "bf16 is two bytes");
static_assert(std::is_trivially_copyable<Bf16>::value, "bf16 copies as its bits");

}  // namespace base

#endif  // BASE_BFLOAT16_H_
