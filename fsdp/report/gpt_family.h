// File: fsdp/report/gpt_family.h
//
// One GPT shape per width, so that "model size" is a single number the
// report can sweep and search: d_model = C (a multiple of 32), layers =
// max(2, C / 32), head size 64 (32 when C is not a multiple of 64), and a
// fixed vocabulary and sequence length. Parameters grow as 12 L C^2 ~ C^3 / 3:
//
//   C     layers  params (vocab 2048, seq_len 128)
//   128   4       1.3e6
//   256   8       7.4e6
//   512   16      5.2e7
//   768   24      1.7e8
//   1024  32      4.1e8
//
//   GptConfig c = GptFamilyConfig(/*d_model=*/256, /*vocab=*/2048, /*seq_len=*/128);
#ifndef FSDP_REPORT_GPT_FAMILY_H_
#define FSDP_REPORT_GPT_FAMILY_H_

#include "fsdp/nn/gpt_spec.h"

namespace fsdp {
namespace report {

// Widths the family defines: multiples of kGptFamilyWidthStep from
// kGptFamilyWidthStep up to kGptFamilyMaxWidth (a 4.6e11-parameter model).
inline constexpr int kGptFamilyWidthStep = 32;
inline constexpr int kGptFamilyMaxWidth = 32768;

// The family member of width d_model (rounded up to a multiple of 32, at
// least 32). Valid for any positive vocab and seq_len.
GptConfig GptFamilyConfig(int d_model, int vocab, int seq_len);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_GPT_FAMILY_H_
