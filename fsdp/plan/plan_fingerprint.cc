// File: fsdp/plan/plan_fingerprint.cc
#include "fsdp/plan/plan_fingerprint.h"

#include <string>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace fsdp {
namespace plan {
namespace {

std::string DeterministicSerialization(const proto::ShardPlan& plan) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream string_stream(&bytes);
    google::protobuf::io::CodedOutputStream coded_stream(&string_stream);
    // The plan has no map fields, so the output is already canonical; asking
    // for determinism keeps it so if one is ever added.
    coded_stream.SetSerializationDeterministic(true);
    plan.SerializeToCodedStream(&coded_stream);
  }  // the streams' destructors trim `bytes` to the bytes written
  return bytes;
}

}  // namespace

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

uint64_t ComputePlanFingerprint(const proto::ShardPlan& plan) {
  if (plan.fingerprint() == 0) return Fnv1a64(DeterministicSerialization(plan));
  proto::ShardPlan without_fingerprint = plan;  // copy only when we must clear it
  without_fingerprint.clear_fingerprint();
  return Fnv1a64(DeterministicSerialization(without_fingerprint));
}

}  // namespace plan
}  // namespace fsdp
