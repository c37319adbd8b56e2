#!/usr/bin/env bash
# Installs every Debian package this project needs. Idempotent: when all are
# present it only checks (well under a second) and installs nothing.
# Run as root on Debian 12 (bookworm).
set -euo pipefail

packages=(
  bazel-bootstrap bazel-platforms bazel-rules-java   # Bazel 4.2.3 and its offline rules
  g++ pkg-config
  libucx-dev ucx-utils                               # UCX 1.13 (+ ucx_perftest for the bench)
  libabsl-dev                                        # Abseil 20220623
  libprotobuf-dev protobuf-compiler                  # protobuf 3.21 and protoc
  libgtest-dev                                       # GoogleTest 1.12
  libopenblas-dev                                    # CBLAS for matrix products
  libdnnl-dev                                        # oneDNN 2.6: fp32 and bf16 matrix products
  libssl-dev                                         # SHA-256 of parameters (libcrypto)
  nlohmann-json3-dev                                 # JSON (header-only) for safetensors headers
  clang libclang-rt-dev                              # clang++ with libFuzzer, ASan, UBSan (fuzz tests)
  gnuplot-nox                                        # memory-report and training-curve plots
  fortunes                                           # the quick-start corpus (/usr/share/games/fortunes)
  iproute2                                           # network namespaces for the multi-host test
  openmpi-bin libopenmpi-dev                         # mpirun, the engine of tests/integration/engines
  slurm-wlm munge                                    # srun/sbatch and a cluster the Slurm test starts
  libpmix-dev                                        # PMIx 4.2: the rendezvous bootstrap under mpirun / srun --mpi=pmix
  python3
  python3-torch                                      # PyTorch 1.13 (CPU): the Llama's parity test
  libtcmalloc-minimal4                               # the allocator speed_bench's PyTorch reference runs best with
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing Debian packages: ${missing[*]}" >&2
  echo "setup: run this script as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2
