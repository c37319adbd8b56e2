// File: tests/fsdp/train/model_entry_test.cc
//
// The model entry for each dtype pair: which Model call a unit's parameters
// and gradients reach, and the bf16 gradients' rounding (first micro-batch)
// and fp32 addition then rounding (later ones), against formulas.
#include "fsdp/train/model_entry.h"

#include <string>
#include <vector>

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
  bool accepts_bf16_params() const override { return true; }

  absl::Status ForwardUnit(int, absl::Span<const float>, const Batch&) override {
    calls.push_back("ForwardUnit");
    return absl::OkStatus();
  }
  absl::Status ForwardUnitBf16(int, absl::Span<const uint16_t>, const Batch&) override {
    calls.push_back("ForwardUnitBf16");
    return absl::OkStatus();
  }
  absl::Status BackwardUnit(int, absl::Span<const float> params, absl::Span<float> grads,
                            float loss_scale, GradWrite write) override {
    calls.push_back("BackwardUnit");
    Write(params, grads, loss_scale, write);
    return absl::OkStatus();
  }
  absl::Status BackwardUnitBf16(int, absl::Span<const uint16_t> params, absl::Span<float> grads,
                                float loss_scale, GradWrite write) override {
    calls.push_back("BackwardUnitBf16");
    std::vector<float> widened;
    for (uint16_t p : params) widened.push_back(comm::BFloat16ToFloat(p));
    Write(widened, grads, loss_scale, write);
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
  for (float x : v) out.push_back(comm::FloatToBFloat16(x));
  return out;
}
float RoundBf16(float v) { return comm::BFloat16ToFloat(comm::FloatToBFloat16(v)); }

TEST(ModelEntryTest, ForwardTakesTheParametersDtypesEntry) {
  RecordingModel model;
  std::vector<float> params = Params();
  std::vector<uint16_t> params16 = Bf16(params);
  Batch batch;
  ASSERT_TRUE(ForwardModelUnit(model, 0, absl::MakeConstSpan(params), batch).ok());
  ASSERT_TRUE(ForwardModelUnit(model, 0, absl::MakeConstSpan(params16), batch).ok());
  EXPECT_EQ(model.calls, (std::vector<std::string>{"ForwardUnit", "ForwardUnitBf16"}));
}

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
    const char* call = bf16_params ? "BackwardUnitBf16" : "BackwardUnit";
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
        RoundBf16(RecordingModel::Grad(comm::BFloat16ToFloat(params16[i]), i, 0.25f));
    EXPECT_EQ(comm::BFloat16ToFloat(grads16[i]), expected[i]) << i;
  }
  ASSERT_TRUE(BackwardModelUnit(model, 0, p, absl::MakeSpan(grads16), GradWrite::kAdd,
                                absl::MakeSpan(scratch), 0.75f)
                  .ok());
  for (int i = 0; i < kNumel; ++i) {
    const float second = RecordingModel::Grad(comm::BFloat16ToFloat(params16[i]), i, 0.75f);
    EXPECT_EQ(scratch[i], second) << i;  // the model wrote the scratch afresh
    EXPECT_EQ(comm::BFloat16ToFloat(grads16[i]), RoundBf16(expected[i] + second)) << i;
  }
  // The first call went through the model's bf16-gradient entry (whose
  // default runs BackwardUnitBf16 and rounds), the second through the plain one.
  EXPECT_EQ(model.calls, (std::vector<std::string>{"BackwardUnitBf16", "BackwardUnitBf16"}));
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
