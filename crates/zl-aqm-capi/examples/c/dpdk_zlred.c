/*
 * dpdk_zlred: ZL-RED, through the C ABI (zl_aqm.h), as the drop decision in front of a DPDK
 * rte_ring that serves as an egress queue, on the net_null virtual device.
 *
 * The loop is an ordinary DPDK run-to-completion loop: receive a burst from the port, decide
 * each packet with zl_aqm_arrive (queue length = rte_ring_count of the egress ring, time =
 * the TSC in nanoseconds, random state = one uint64_t), enqueue the admitted ones on the ring
 * or free the dropped ones, then drain the ring to the port's TX queue at 29 packets per 32
 * received (the egress link is 10 % slower than the offered load, so the queue builds and
 * ZL-RED must act).
 *
 * net_null hands out zero-filled frames, so the loop plays traffic generator too: it writes an
 * Ethernet + IPv4 header into each frame, with the source address of one of 300 flows (one
 * of them, 10.0.0.0, sending 10x the others), then hashes the addresses it reads back from
 * the frame, as a real application would. Printed: the heavy flow's drop rate against the
 * others', ZL-RED's counters and its flow estimate 1/P(t).
 *
 * Build (the CI's DPDK step and tests/dpdk_example.rs with --features dpdk do this):
 *   cc -O2 -std=gnu11 -Icrates/zl-aqm-capi/include \
 *      crates/zl-aqm-capi/examples/c/dpdk_zlred.c \
 *      $(pkg-config --cflags --libs libdpdk) target/debug/libzl_aqm_capi.a \
 *      -lpthread -ldl -lm -o target/dpdk_zlred
 * Run:
 *   target/dpdk_zlred --no-huge --no-pci -m 512 --file-prefix zlr-example -l 0 \
 *      --vdev net_null0 --log-level='*:warning' -- [packets]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "zl_aqm.h"

#define BURST 32
#define QUEUE_PACKETS 300u
#define FLOWS 300u
#define HEAVY_PERCENT 3u

static uint64_t arrivals[FLOWS], drops[FLOWS];

static int fail(const char *what)
{
    char msg[256];
    zl_last_error(msg, sizeof msg);
    fprintf(stderr, "dpdk_zlred: %s: %s\n", what, msg);
    return 1;
}

/* Writes Ethernet + IPv4 (src 10.0.x.y for `flow`, dst 192.0.2.1) into the frame. */
static void write_headers(struct rte_mbuf *m, uint32_t flow)
{
    struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
    memset(eth, 0, sizeof *eth);
    eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
    memset(ip, 0, sizeof *ip);
    ip->version_ihl = RTE_IPV4_VHL_DEF;
    ip->total_length = rte_cpu_to_be_16(rte_pktmbuf_pkt_len(m) - sizeof *eth);
    ip->time_to_live = 64;
    ip->next_proto_id = IPPROTO_UDP;
    ip->src_addr = rte_cpu_to_be_32(RTE_IPV4(10, 0, flow >> 8, flow & 0xff));
    ip->dst_addr = rte_cpu_to_be_32(RTE_IPV4(192, 0, 2, 1));
    ip->hdr_checksum = rte_ipv4_cksum(ip);
}

/* The flow hash of a frame: the ZL-RED paper's key (source and destination addresses), mixed. */
static uint64_t flow_hash(const struct rte_mbuf *m, uint32_t *flow_out)
{
    const struct rte_ipv4_hdr *ip =
        rte_pktmbuf_mtod_offset(m, const struct rte_ipv4_hdr *, sizeof(struct rte_ether_hdr));
    uint32_t src = rte_be_to_cpu_32(ip->src_addr), dst = rte_be_to_cpu_32(ip->dst_addr);
    *flow_out = src & 0xffff;
    uint64_t state = ((uint64_t)src << 32) | dst;
    return zl_rng_next(&state); /* SplitMix64's mixer as a hash of the key */
}

int main(int argc, char **argv)
{
    int used = rte_eal_init(argc, argv);
    if (used < 0) {
        fprintf(stderr, "dpdk_zlred: rte_eal_init failed: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    argc -= used;
    argv += used;
    uint64_t packets = argc > 1 ? strtoull(argv[1], NULL, 0) : 1000000;

    if (rte_eth_dev_count_avail() < 1) {
        fprintf(stderr, "dpdk_zlred: no port (give --vdev net_null0)\n");
        return 1;
    }
    uint16_t port = 0;
    struct rte_mempool *pool =
        rte_pktmbuf_pool_create("zl_pool", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    if (pool == NULL || rte_eth_dev_configure(port, 1, 1, &conf) < 0
        || rte_eth_rx_queue_setup(port, 0, 512, rte_eth_dev_socket_id(port), NULL, pool) < 0
        || rte_eth_tx_queue_setup(port, 0, 512, rte_eth_dev_socket_id(port), NULL) < 0
        || rte_eth_dev_start(port) < 0) {
        fprintf(stderr, "dpdk_zlred: port set-up failed: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    /* The egress queue: exactly QUEUE_PACKETS slots, one producer, one consumer. */
    struct rte_ring *ring = rte_ring_create("zl_egress", QUEUE_PACKETS, rte_socket_id(),
                                            RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
    if (ring == NULL) {
        fprintf(stderr, "dpdk_zlred: rte_ring_create: %s\n", rte_strerror(rte_errno));
        return 1;
    }

    ZlZlredParams params = zl_zlred_params_default();
    ZlQueueParams queue = {
        .capacity_packets = rte_ring_get_capacity(ring),
        .capacity_bytes = ZL_UNBOUNDED_BYTES,
        .link_rate_bps = 10000000000ull,
    };
    ZlAqm *aqm = NULL;
    if (zl_aqm_new_zlred(&params, &queue, NULL, &aqm) != ZL_OK)
        return fail("zl_aqm_new_zlred");

    uint64_t rng = 2026, trace = 1;
    const double ns_per_cycle = 1e9 / (double)rte_get_tsc_hz();
    uint64_t received = 0, sent = 0, ring_full = 0, credit = 0;
    ZlArrival a = zl_arrival_default();
    struct rte_mbuf *rx[BURST], *tx[BURST];

    while (received < packets) {
        uint16_t n = rte_eth_rx_burst(port, 0, rx, BURST);
        uint64_t now = (uint64_t)((double)rte_get_tsc_cycles() * ns_per_cycle);
        for (uint16_t i = 0; i < n; i++) {
            struct rte_mbuf *m = rx[i];
            uint64_t r = zl_rng_next(&trace);
            write_headers(m, r % 100 < HEAVY_PERCENT ? 0 : 1 + (uint32_t)((r >> 32) % (FLOWS - 1)));

            uint32_t flow;
            a.flow_hash = flow_hash(m, &flow);
            a.now_ns = now;
            a.queue_packets = rte_ring_count(ring);
            a.packet_len = rte_pktmbuf_pkt_len(m);
            ZlVerdict v = zl_aqm_arrive(aqm, &a, &rng);
            arrivals[flow]++;
            if (v <= ZL_VERDICT_MARK) {
                if (rte_ring_sp_enqueue(ring, m) != 0) { /* cannot happen: tail drop first */
                    ring_full++;
                    rte_pktmbuf_free(m);
                }
            } else {
                if (v == ZL_VERDICT_INVALID_ARGUMENT)
                    return fail("zl_aqm_arrive");
                drops[flow]++;
                rte_pktmbuf_free(m);
            }
        }
        received += n;

        /* The egress link: 29 packets of service per 32 arrivals. */
        credit += (uint64_t)n * 29;
        unsigned int k = credit / 32;
        credit %= 32;
        while (k > 0) {
            unsigned int d = rte_ring_sc_dequeue_burst(ring, (void **)tx, k < BURST ? k : BURST, NULL);
            if (d == 0)
                break;
            uint16_t s = rte_eth_tx_burst(port, 0, tx, d);
            for (uint16_t i = s; i < d; i++)
                rte_pktmbuf_free(tx[i]);
            sent += s;
            k -= d;
        }
    }

    ZlAqmStats st;
    double estimate;
    if (zl_aqm_stats(aqm, &st) != ZL_OK || zl_aqm_flow_estimate(aqm, &estimate) != ZL_OK)
        return fail("stats");
    uint64_t other_arrivals = 0, other_drops = 0;
    for (uint32_t f = 1; f < FLOWS; f++) {
        other_arrivals += arrivals[f];
        other_drops += drops[f];
    }
    printf("received=%" PRIu64 " sent=%" PRIu64 " ring_full=%" PRIu64 "\n", received, sent,
           ring_full);
    printf("enqueued=%" PRIu64 " early_drops=%" PRIu64 " forced_drops=%" PRIu64
           " tail_drops=%" PRIu64 "\n",
           st.enqueued, st.early_drops, st.forced_drops, st.tail_drops);
    printf("heavy_flow_drop_rate=%.4f other_flows_drop_rate=%.4f estimated_flows=%.1f\n",
           arrivals[0] ? (double)drops[0] / arrivals[0] : 0.0,
           other_arrivals ? (double)other_drops / other_arrivals : 0.0, estimate);

    struct rte_mbuf *m = NULL;
    while (rte_ring_sc_dequeue(ring, (void **)&m) == 0)
        rte_pktmbuf_free(m);
    zl_aqm_free(aqm);
    rte_ring_free(ring);
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
    rte_eal_cleanup();
    return 0;
}
