# File: tests/integration/two_hosts.sh
#
# Sourced by the multi-host tests: two "hosts" on one machine, network
# namespaces joined by a veth pair, and their cleanup. Needs root and
# iproute2.
#
#   source two_hosts.sh
#   make_two_hosts fsdp_test 10.231    # sets ns_a ns_b addr_a addr_b, traps EXIT
#   ip netns exec "$ns_a" ...; pids+=($!)   # pids still running at exit are killed
#
# Names and the subnet (<prefix>.N.0/24, N from the shell's pid) are the
# caller's own; no traffic leaves the namespaces. Both namespaces, the veth
# pair and every pid in `pids` are removed on exit, pass or fail.

pids=()

cleanup_two_hosts() {
  # A pid may be a `timeout` wrapper: its child goes first.
  for pid in "${pids[@]:-}"; do
    [ -n "$pid" ] || continue
    pkill -9 -P "$pid" 2>/dev/null || true
    kill -9 "$pid" 2>/dev/null || true
  done
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
}

# make_two_hosts <name prefix> <first two octets of the /16 to take a /24 from>
make_two_hosts() {
  local prefix="$1" net="$2" id=$$
  if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
    echo "$(basename "$0"): needs root and iproute2 (ip netns); run the suite as root" >&2
    exit 1
  fi
  local subnet=$((id % 200 + 20))
  ns_a="${prefix}_a_${id}"
  ns_b="${prefix}_b_${id}"
  addr_a="${net}.${subnet}.1"
  addr_b="${net}.${subnet}.2"
  # veth names are limited to 15 characters
  local veth_a="fva${id}" veth_b="fvb${id}"
  trap cleanup_two_hosts EXIT
  ip netns add "$ns_a"
  ip netns add "$ns_b"
  ip link add "$veth_a" type veth peer name "$veth_b"
  ip link set "$veth_a" netns "$ns_a"
  ip link set "$veth_b" netns "$ns_b"
  ip -n "$ns_a" addr add "${addr_a}/24" dev "$veth_a"
  ip -n "$ns_b" addr add "${addr_b}/24" dev "$veth_b"
  for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
  ip -n "$ns_a" link set "$veth_a" up
  ip -n "$ns_b" link set "$veth_b" up
}
