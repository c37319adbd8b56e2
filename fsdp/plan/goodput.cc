// File: fsdp/plan/goodput.cc
#include "fsdp/plan/goodput.h"

#include <algorithm>
#include <cmath>

namespace fsdp {
namespace plan {

CheckpointCosts CheckpointCostsFor(const proto::CheckpointCost& cost, double bytes_per_rank) {
  CheckpointCosts costs;
  costs.save_s = cost.save_fixed_s() + bytes_per_rank / cost.save_bytes_per_s();
  costs.restart_s = cost.restart_fixed_s() + bytes_per_rank / cost.restart_bytes_per_s();
  return costs;
}

Goodput YoungDalyGoodput(double step_s, int nodes, double failures_per_node_hour,
                         const CheckpointCosts& costs) {
  Goodput g;
  const double rate_per_s = failures_per_node_hour * nodes / 3600;
  if (rate_per_s <= 0) return g;
  g.mtbf_s = 1 / rate_per_s;
  g.interval_s = std::max(step_s, std::sqrt(2 * costs.save_s * g.mtbf_s));
  g.fraction = std::clamp(
      1 - costs.save_s / g.interval_s - (costs.restart_s + g.interval_s / 2) / g.mtbf_s, 0.0,
      1.0);
  return g;
}

}  // namespace plan
}  // namespace fsdp
