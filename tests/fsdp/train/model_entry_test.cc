// File: tests/fsdp/train/model_entry_test.cc
//
// The model entry for each dtype pair: which gradients the one Model call
// receives, and the bf16 gradients' rounding (first micro-batch)
// and fp32 addition then rounding (later ones), against formulas.
#include "fsdp/train/model_entry.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/bfloat16.h"
#include "comm/dtype.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace {

// One unit of kNumel parameters; the gradient of element i is
// loss_scale * (p_i + (i + 1) / 1000), where p_i is the parameter as given
// (bf16 ones widened): values that bf16 cannot hold exactly.
constexpr int kNumel = 5;

class RecordingModel : public Model {
 public:
  RecordingModel() : units_{UnitSpec{"u", {ParamSpec{"u.w", {kNumel}}}}} {}
  const std::vector<UnitSpec>& units() const override { return units_; }
  void InitUnitParams(int, absl::Span<float>, uint64_t) const override {}
  float loss() const override { return 0.0f; }

  absl::Status ForwardUnit(int, ConstDtypeSpan, const Batch&) override {
    return absl::OkStatus();
  }
  // Records "BackwardUnit(<params dtype> params, <grads dtype> grads)".
  // bf16 gradients are computed in the fp32 scratch and rounded, as a model
  // whose products cannot write bf16 does.
  absl::Status BackwardUnit(int, ConstDtypeSpan params, UnitGrads grads, float loss_scale,
                            GradWrite write) override {
    calls.push_back(absl::StrCat("BackwardUnit(", comm::DtypeName(params.dtype()), " params, ",
                                 comm::DtypeName(grads.values.dtype()), " grads)"));
    std::vector<float> widened;
    if (params.dtype() == comm::Dtype::kBFloat16) {
      for (uint16_t p : params.as<uint16_t>()) widened.push_back(base::FromBf16Bits(p));
    } else {
      for (float p : params.as<float>()) widened.push_back(p);
    }
    if (grads.values.dtype() == comm::Dtype::kFloat32) {
      Write(widened, grads.values.as<float>(), loss_scale, write);
      return absl::OkStatus();
    }
    Write(widened, grads.fp32_scratch, loss_scale, GradWrite::kOverwrite);
    absl::Span<uint16_t> grads16 = grads.values.as<uint16_t>();
    for (int i = 0; i < kNumel; ++i) grads16[i] = base::ToBf16Bits(grads.fp32_scratch[i]);
    return absl::OkStatus();
  }

  static float Grad(float param, int i, float loss_scale) {
    return loss_scale * (param + static_cast<float>(i + 1) / 1000.0f);
  }

  std::vector<std::string> calls;

 private:
  static void Write(absl::Span<const float> params, absl::Span<float> grads, float loss_scale,
                    GradWrite write) {
    for (int i = 0; i < kNumel; ++i) {
      const float g = Grad(params[i], i, loss_scale);
      grads[i] = write == GradWrite::kAdd ? grads[i] + g : g;
    }
  }
  std::vector<UnitSpec> units_;
};

std::vector<float> Params() { return {1.0f, -2.5f, 3.25f, 0.125f, 7.0f}; }
std::vector<uint16_t> Bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float x : v) out.push_back(base::ToBf16Bits(x));
  return out;
}
float RoundBf16(float v) { return base::FromBf16Bits(base::ToBf16Bits(v)); }

TEST(ModelEntryTest, Fp32GradientsAreWrittenByTheModelAsWriteSays) {
  for (bool bf16_params : {false, true}) {
    RecordingModel model;
    std::vector<float> params = Params();
    std::vector<uint16_t> params16 = Bf16(params);
    const ConstDtypeSpan p = bf16_params ? ConstDtypeSpan(absl::MakeConstSpan(params16))
                                         : ConstDtypeSpan(absl::MakeConstSpan(params));
    std::vector<float> grads(kNumel, 99.0f);  // kOverwrite: whatever was there
    ASSERT_TRUE(BackwardModelUnit(model, 0, p, absl::MakeSpan(grads), GradWrite::kOverwrite, {},
                                  0.5f)
                    .ok());
    ASSERT_TRUE(
        BackwardModelUnit(model, 0, p, absl::MakeSpan(grads), GradWrite::kAdd, {}, 0.5f).ok());
    const char* call = bf16_params ? "BackwardUnit(bf16 params, fp32 grads)"
                                   : "BackwardUnit(fp32 params, fp32 grads)";
    EXPECT_EQ(model.calls, (std::vector<std::string>{call, call}));
    for (int i = 0; i < kNumel; ++i) {
      const float param = bf16_params ? RoundBf16(params[i]) : params[i];
      const float g = RecordingModel::Grad(param, i, 0.5f);
      EXPECT_EQ(grads[i], g + g) << i;
    }
  }
}

// [Note: bf16 gradients] The first micro-batch's gradients rounded; a later
// one's added to them in fp32 and the sum rounded, element by element.
TEST(ModelEntryTest, Bf16GradientsAreRoundedThenAddedThroughTheScratch) {
  RecordingModel model;
  std::vector<uint16_t> params16 = Bf16(Params());
  const ConstDtypeSpan p = absl::MakeConstSpan(params16);
  std::vector<uint16_t> grads16(kNumel, 0xFFFF);
  std::vector<float> scratch(kNumel, -1.0f);
  ASSERT_TRUE(BackwardModelUnit(model, 0, p, absl::MakeSpan(grads16), GradWrite::kOverwrite,
                                absl::MakeSpan(scratch), 0.25f)
                  .ok());
  std::vector<float> expected(kNumel);
  for (int i = 0; i < kNumel; ++i) {
    expected[i] =
        RoundBf16(RecordingModel::Grad(base::FromBf16Bits(params16[i]), i, 0.25f));
    EXPECT_EQ(base::FromBf16Bits(grads16[i]), expected[i]) << i;
  }
  ASSERT_TRUE(BackwardModelUnit(model, 0, p, absl::MakeSpan(grads16), GradWrite::kAdd,
                                absl::MakeSpan(scratch), 0.75f)
                  .ok());
  for (int i = 0; i < kNumel; ++i) {
    const float second = RecordingModel::Grad(base::FromBf16Bits(params16[i]), i, 0.75f);
    EXPECT_EQ(scratch[i], second) << i;  // the model wrote the scratch afresh
    EXPECT_EQ(base::FromBf16Bits(grads16[i]), RoundBf16(expected[i] + second)) << i;
  }
  // The first call handed the model the bf16 gradients (it writes them
  // whole), the second fp32 ones in the scratch.
  EXPECT_EQ(model.calls, (std::vector<std::string>{"BackwardUnit(bf16 params, bf16 grads)",
                                                   "BackwardUnit(bf16 params, fp32 grads)"}));
}

TEST(ModelEntryTest, Bf16GradientsNeedBf16ParametersAndAScratch) {
  RecordingModel model;
  std::vector<float> params = Params();
  std::vector<uint16_t> params16 = Bf16(params);
  std::vector<uint16_t> grads16(kNumel);
  std::vector<float> scratch(kNumel);
  absl::Status s = BackwardModelUnit(model, 0, absl::MakeConstSpan(params),
                                     absl::MakeSpan(grads16), GradWrite::kOverwrite,
                                     absl::MakeSpan(scratch), 1.0f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("need bf16 parameters (got fp32)"), std::string::npos) << s;
  s = BackwardModelUnit(model, 0, absl::MakeConstSpan(params16), absl::MakeSpan(grads16),
                        GradWrite::kAdd, absl::MakeSpan(scratch).subspan(1), 1.0f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("scratch of their 5 elements (got 4)"), std::string::npos) << s;
  EXPECT_TRUE(model.calls.empty());
}

}  // namespace
}  // namespace fsdp
