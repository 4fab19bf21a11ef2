#!/usr/bin/env bash
# The three-namespace forwarding topology of crates/zl-afxdp/examples/afxdp_forward.rs, for
# manual experiments (ping, iperf3, tcpdump, running zlrouter on r0/r1). Root only.
#
#   zlr-gen: g0 10.0.1.2/24  <->  zlr-rtr: r0 10.0.1.1/24 | r1 10.0.2.1/24  <->  zlr-sink: s0 10.0.2.2/24
#
# usage: forward-topology.sh up [kernel]   # "kernel" also turns on ip_forward in zlr-rtr
#        forward-topology.sh down
#        forward-topology.sh status
set -euo pipefail

GEN=zlr-gen RTR=zlr-rtr SINK=zlr-sink

up() {
    for ns in "$GEN" "$RTR" "$SINK"; do
        ip netns add "$ns"
        ip -n "$ns" link set lo up
    done
    ip -n "$RTR" link add r0 type veth peer name g0 netns "$GEN"
    ip -n "$RTR" link add r1 type veth peer name s0 netns "$SINK"
    local spec ns dev addr
    for spec in "$GEN g0 10.0.1.2/24" "$RTR r0 10.0.1.1/24" "$RTR r1 10.0.2.1/24" "$SINK s0 10.0.2.2/24"; do
        read -r ns dev addr <<<"$spec"
        ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1"
        ip -n "$ns" addr add "$addr" dev "$dev"
        ip -n "$ns" link set "$dev" up
    done
    ip -n "$GEN" route add default via 10.0.1.1
    ip -n "$SINK" route add default via 10.0.2.1
    if [ "${1:-}" = kernel ]; then
        ip netns exec "$RTR" sysctl -qw net.ipv4.ip_forward=1
    fi
    echo "up: $GEN, $RTR, $SINK"
}

down() {
    local ns
    for ns in "$GEN" "$RTR" "$SINK"; do
        ip netns del "$ns" 2>/dev/null || true
    done
    echo "down"
}

status() {
    local ns
    for ns in "$GEN" "$RTR" "$SINK"; do
        echo "== $ns"
        ip -n "$ns" -br link 2>/dev/null || echo "(absent)"
    done
}

case "${1:-}" in
    up) shift; up "$@" ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up [kernel] | down | status" >&2; exit 2 ;;
esac
