// File: fsdp/nn/blas_tsan_suppressions.cc
//
// ThreadSanitizer suppressions for OpenBLAS, compiled into every binary that
// links the layers (alwayslink), so `--config=tsan` needs no suppressions
// file on the command line (tests run from their runfiles tree, where a
// relative path would not resolve).
//
// Why it is safe: Debian's OpenBLAS is not built with ThreadSanitizer. Its
// worker threads hand off sgemm tiles through their own spin-wait flags,
// which TSan cannot see as synchronization, so it reports races inside
// sgemm kernels (seen: sgemm_beta_COOPERLAKE) between OpenBLAS's own
// threads. Our code never shares a buffer with OpenBLAS while a call is in
// progress: every cblas_* call returns before its outputs are read.
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() {
  return "race:libopenblas.so\n"
         "race:libopenblasp\n";
}
#endif
