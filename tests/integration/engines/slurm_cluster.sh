#!/usr/bin/env bash
# A one-node Slurm cluster of this test's own: munged, slurmctld and slurmd in
# a scratch directory, on ports of their own, so that tests (and engineers)
# running at once do not share daemons. Sourced by the engine tests:
#
#   source slurm_cluster.sh
#   slurm_cluster_start DIR || skip "..."   # exports SLURM_CONF; waits for the node
#   srun -n 4 --overcommit prog ...
#   slurm_cluster_stop                      # also run from an EXIT trap
#
# Every wait has a deadline and says what it waited for.

slurm_cluster_pids=()

# Prints the reason and returns 1 when the engine cannot run here.
slurm_cluster_missing() {
  if [ "$(id -u)" -ne 0 ]; then echo "not root (munged/slurmd run as root here)"; return 0; fi
  local tool
  for tool in munged slurmctld slurmd srun sbatch sinfo; do
    if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
      echo "$tool is not installed (tools/setup.sh installs slurm-wlm and munge)"; return 0
    fi
  done
  if [ ! -r /etc/munge/munge.key ]; then echo "/etc/munge/munge.key is missing"; return 0; fi
  return 1
}

# A free TCP port below the ephemeral range (as comm's PickFreePort does).
slurm_cluster_free_port() {
  python3 - <<'PY'
import random, socket
for _ in range(200):
    p = random.randrange(12000, 32000)
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", p)); s.close(); print(p); break
    except OSError:
        s.close()
PY
}

# The slurm.conf lines every test cluster shares (one directory of state,
# spool, logs and munge socket; root; no cgroups, accounting or MPI plugin):
# slurm_cluster_common_conf DIR CTLD_PORT SLURMD_PORT.
# Job ids start at a random number, as on a cluster that has run jobs before:
# a store's derived port (a hash of job and step id) then differs from one
# test cluster to the next, so a process some earlier cluster left behind
# cannot be holding this job's port by construction.
slurm_cluster_common_conf() {
  local dir=$1 ctld_port=$2 slurmd_port=$3
  cat <<CONF
FirstJobId=$((1000 + RANDOM * 16 + RANDOM % 16))
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
CONF
}

slurm_cluster_start() {
  local dir=$1
  local host
  host=$(hostname -s)
  mkdir -p "$dir"/{state,spool,log,munge}
  chmod 700 "$dir/munge"
  local ctld_port slurmd_port
  ctld_port=$(slurm_cluster_free_port)
  slurmd_port=$(slurm_cluster_free_port)
  cat >"$dir/slurm.conf" <<CONF
ClusterName=fsdptest
SlurmctldHost=$host
$(slurm_cluster_common_conf "$dir" "$ctld_port" "$slurmd_port")
SlurmctldParameters=enable_configless
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  export SLURM_CONF=$dir/slurm.conf
  /usr/sbin/munged --force --socket="$dir/munge/munge.socket" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" 2>>"$dir/log/munged.stderr" || {
    echo "slurm_cluster: munged did not start: $(cat "$dir/log/munged.stderr")" >&2; return 1; }
  slurm_cluster_pids+=("$(cat "$dir/munge/munged.pid")")
  /usr/sbin/slurmctld -f "$dir/slurm.conf" -i || {
    echo "slurm_cluster: slurmctld did not start: $(tail -5 "$dir/log/slurmctld.log")" >&2; return 1; }
  /usr/sbin/slurmd -f "$dir/slurm.conf" || {
    echo "slurm_cluster: slurmd did not start: $(tail -5 "$dir/log/slurmd.$host.log")" >&2; return 1; }
  local deadline=$((SECONDS + 60)) state=""
  while [ $SECONDS -lt $deadline ]; do
    [ -f "$dir/slurmctld.pid" ] && [ -f "$dir/slurmd.$host.pid" ] && \
      state=$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1)
    case "$state" in idle|mixed|allocated) break ;; esac
    sleep 0.5
  done
  [ -f "$dir/slurmctld.pid" ] && slurm_cluster_pids+=("$(cat "$dir/slurmctld.pid")")
  [ -f "$dir/slurmd.$host.pid" ] && slurm_cluster_pids+=("$(cat "$dir/slurmd.$host.pid")")
  case "$state" in
    idle|mixed|allocated) return 0 ;;
    *) echo "slurm_cluster: node $host not idle after 60 s (state '$state'); slurmctld log:" >&2
       tail -20 "$dir/log/slurmctld.log" >&2; tail -20 "$dir/log/slurmd.$host.log" >&2
       return 1 ;;
  esac
}

# Stops this cluster's daemons (only the ones it started, by pid): SIGTERM,
# then SIGKILL after 10 s.
slurm_cluster_stop() {
  local pid deadline
  # Jobs still running (a test that failed midway) go first: their tasks are
  # not the daemons' children and would outlive them.
  if [ ${#slurm_cluster_pids[@]} -gt 0 ] && command -v scancel >/dev/null; then
    scancel --full --quiet --user=root 2>/dev/null
    deadline=$((SECONDS + 10))
    while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    [ -z "$(squeue -h -o %i 2>/dev/null)" ] ||
      echo "slurm_cluster: jobs $(squeue -h -o %i | tr '\n' ' ')still running 10 s after scancel" >&2
  fi
  for pid in "${slurm_cluster_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  deadline=$((SECONDS + 10))
  for pid in "${slurm_cluster_pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null
  done
  slurm_cluster_pids=()
}
