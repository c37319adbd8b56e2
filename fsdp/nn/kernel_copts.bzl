"""Compiler options of the element-wise kernel libraries (see fsdp/nn/simd.h)."""

# -O2 even in fastbuild, so tests run the vector code as it ships (as
# //comm:reduce does). -ffp-contract=off: no FMA fusion, which only the avx512f
# variant could do, so every ISA variant rounds alike ([Note: ISA-independent
# results]). -fno-math-errno: sqrt becomes one instruction. -Wno-psabi: the
# 64-byte vector type is only passed between always-inlined functions.
KERNEL_COPTS = [
    "-O2",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-Wno-psabi",
]
