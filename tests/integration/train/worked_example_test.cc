// File: tests/integration/train/worked_example_test.cc
//
// The worked example of docs/data-parallel.md with four real processes over
// loopback: ranks whose gradients for one weight are 0.8, 1.2, 1.0 and 1.0
// all receive their mean, 1.0, and take the identical SGD step, through the
// training step's real reduce-scatter / scale / all-gather path.
//
// This binary plays both parts: run by Bazel it is a gtest that launches
// itself as 4 ranks (comm/launcher); as a launched rank it trains one step
// and writes what it saw to $WORKED_EXAMPLE_DIR/rank<r>.txt.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/launcher/launcher.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/train/train_step.h"
#include "gtest/gtest.h"
#include "tests/fsdp/train/test_models.h"

namespace {

constexpr int kWorld = 4;
constexpr int kFirstToken[kWorld] = {8, 12, 10, 10};  // gradient = token / 10
constexpr float kInitial = 0.5f;
constexpr float kLr = 0.1f;

int argc_saved;
char** argv_saved;

// One rank: one step of the one-weight model; writes
// "<local grad> <received grad> <weight after, as uint32 bits>".
absl::Status RunRank() {
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> world,
                        comm::Communicator::CreateFromEnvironment());
  const int rank = world->rank();
  fsdp::MemoryTracker tracker;
  fsdp_test::OneWeightModel model(kInitial);
  auto sgd = std::make_unique<fsdp_test::PlainSgd>();
  fsdp_test::PlainSgd* sgd_view = sgd.get();
  fsdp::TrainStepOptions options;
  options.comm_timeout = absl::Seconds(60);
  FSDP_ASSIGN_OR_RETURN(auto trainer, fsdp::DataParallelTrainer::Create(
                                          &model, world.get(), &tracker, std::move(sgd), options));
  fsdp::Batch batch;
  batch.batch_size = 1;
  batch.seq_len = 1;
  batch.inputs = {kFirstToken[rank]};
  batch.targets = {0};
  FSDP_ASSIGN_OR_RETURN(fsdp::StepResult result, trainer->Step({batch}, kLr));
  (void)result;
  FSDP_ASSIGN_OR_RETURN(std::vector<std::vector<float>> params,
                        trainer->GatherParamsInModelOrder());
  const float weight = params[0][0];
  uint32_t bits;
  std::memcpy(&bits, &weight, sizeof(bits));
  const std::string path = absl::StrCat(std::getenv("WORKED_EXAMPLE_DIR"), "/rank", rank, ".txt");
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (out == nullptr) return absl::InternalError(absl::StrCat("cannot write ", path));
  std::fprintf(out, "%.9g %.9g %u\n", model.last_local_grad(), sgd_view->last_grads()[0][0],
               bits);
  std::fclose(out);
  return absl::OkStatus();
}

TEST(WorkedExampleProcessesTest, FourRanksReceiveTheMeanAndTakeTheSameStep) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  comm::LaunchOptions launch = comm::SelfLaunchOptions(kWorld, argc_saved, argv_saved);
  launch.extra_env["WORKED_EXAMPLE_DIR"] = dir;
  absl::StatusOr<int> result = comm::LaunchLocalRanks(launch);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(*result, 0);

  double mean = 0.0;
  for (int r = 0; r < kWorld; ++r) mean += kFirstToken[r] / 10.0;
  mean /= kWorld;
  uint32_t first_bits = 0;
  for (int r = 0; r < kWorld; ++r) {
    std::ifstream in(absl::StrCat(dir, "/rank", r, ".txt"));
    ASSERT_TRUE(in.good()) << "rank " << r << " wrote no result";
    double local = 0, received = 0;
    uint32_t bits = 0;
    in >> local >> received >> bits;
    float weight;
    std::memcpy(&weight, &bits, sizeof(weight));
    EXPECT_NEAR(local, kFirstToken[r] / 10.0, 1e-7) << "rank " << r;
    EXPECT_NEAR(received, mean, 1e-7) << "rank " << r << " did not receive the mean";
    EXPECT_NEAR(weight, kInitial - kLr * mean, 1e-7) << "rank " << r;
    if (r == 0) first_bits = bits;
    EXPECT_EQ(bits, first_bits) << "rank " << r << " took a different step than rank 0";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (comm::IsLaunchedRank()) {
    absl::Status status = RunRank();
    if (!status.ok()) {
      std::fprintf(stderr, "worked_example rank: %s\n", std::string(status.message()).c_str());
      return 1;
    }
    return 0;
  }
  argc_saved = argc;
  argv_saved = argv;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
