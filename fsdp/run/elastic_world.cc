// File: fsdp/run/elastic_world.cc
#include "fsdp/run/elastic_world.h"

#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace fsdp {

absl::StatusOr<TrainOptions> OptionsForWorldSize(const TrainOptions& options, int world) {
  if (world < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world size ", world, " must be positive"));
  }
  const int64_t global_batch = options.global_batch();
  if (global_batch % world != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the global batch of ", global_batch, " sequences (--micro_batch=", options.micro_batch,
        " x --accum=", options.accum, " x --nproc=", options.nproc, ") does not split over ", world,
        " ranks"));
  }
  TrainOptions at = options;
  const int64_t per_rank = global_batch / world;
  int micro_batch = options.micro_batch;
  while (per_rank % micro_batch != 0) --micro_batch;
  at.nproc = world;
  at.micro_batch = micro_batch;
  at.accum = static_cast<int>(per_rank / micro_batch);
  FSDP_RETURN_IF_ERROR(ValidateGroupSize(at.sharding.strategy, at.sharding.group_size, at.nproc));
  return at;
}

absl::Status ValidateElasticOptions(const TrainOptions& options) {
  if (!options.elastic()) {
    if (options.max_nproc != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max_nproc=", options.max_nproc,
                       " needs --min_nproc (the smallest world size the job may go on at)"));
    }
    return absl::OkStatus();
  }
  if (options.min_nproc > options.nproc) {
    return absl::InvalidArgumentError(absl::StrCat("--min_nproc=", options.min_nproc,
                                                   " must not exceed --nproc=", options.nproc,
                                                   " (the world size the job starts at)"));
  }
  if (options.max_nproc < options.nproc) {
    return absl::InvalidArgumentError(absl::StrCat("--max_nproc=", options.max_nproc,
                                                   " must be at least --nproc=", options.nproc));
  }
  if (options.checkpoint_dir.empty() && options.buddy_every == 0) {
    return absl::InvalidArgumentError(
        "--min_nproc needs --buddy_every (copies of the state in memory, which the survivors "
        "hand to the smaller job) or --checkpoint_dir (the newest checkpoint there; "
        "--checkpoint_every sets how many steps it may recompute)");
  }
  std::vector<int> refused;
  std::string first_error;
  for (int world = options.min_nproc; world <= options.max_nproc; ++world) {
    absl::StatusOr<TrainOptions> at = OptionsForWorldSize(options, world);
    if (!at.ok()) {
      refused.push_back(world);
      if (first_error.empty()) first_error = std::string(at.status().message());
    }
  }
  if (refused.empty()) return absl::OkStatus();
  int64_t lcm = 1;
  for (int world = options.min_nproc; world <= options.max_nproc; ++world) {
    lcm = std::lcm(lcm, int64_t{world});
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "an elastic job must be able to go on at every world size from --min_nproc=",
      options.min_nproc, " to --max_nproc=", options.max_nproc, ", but ", first_error,
      refused.size() > 1
          ? absl::StrCat(" (nor over ",
                         absl::StrJoin(std::vector<int>(refused.begin() + 1, refused.end()), ", "),
                         ")")
          : "",
      "; use a global batch that is a multiple of ", lcm, " sequences, or narrow the range"));
}

}  // namespace fsdp
