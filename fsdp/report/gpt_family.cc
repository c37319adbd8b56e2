// File: fsdp/report/gpt_family.cc
#include "fsdp/report/gpt_family.h"

#include <algorithm>

namespace fsdp {
namespace report {

GptConfig GptFamilyConfig(int d_model, int vocab, int seq_len) {
  const int width = std::max(
      kGptFamilyWidthStep,
      (d_model + kGptFamilyWidthStep - 1) / kGptFamilyWidthStep * kGptFamilyWidthStep);
  GptConfig config;
  config.d_model = width;
  config.layers = std::max(2, width / 32);
  config.heads = width % 64 == 0 ? width / 64 : width / 32;
  config.vocab = vocab;
  config.seq_len = seq_len;
  return config;
}

}  // namespace report
}  // namespace fsdp
