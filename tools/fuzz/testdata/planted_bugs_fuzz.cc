// File: tools/fuzz/testdata/planted_bugs_fuzz.cc
//
// A fuzz target with two planted bugs, for run_fuzz_test_test.sh to check
// that the machinery reports them: input "HEAP!" reads past a heap buffer
// (AddressSanitizer), input "UB!" overflows a signed int (UndefinedBehavior-
// Sanitizer, which cc_fuzz_test makes fatal). Anything else is fine.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 5 && std::memcmp(data, "HEAP!", 5) == 0) {
    std::unique_ptr<uint8_t[]> buffer(new uint8_t[size]);
    std::memcpy(buffer.get(), data, size);
    volatile uint8_t past_the_end = buffer[size];  // heap-buffer-overflow
    (void)past_the_end;
  }
  if (size == 3 && std::memcmp(data, "UB!", 3) == 0) {
    volatile int big = 0x7fffffff;
    volatile int sum = big + static_cast<int>(data[0]);  // signed overflow
    (void)sum;
  }
  return 0;
}
