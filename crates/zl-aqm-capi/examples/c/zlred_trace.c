/*
 * zlred_trace: ZL-RED through the C ABI (zl_aqm.h) in front of a simulated egress queue,
 * over a synthetic trace, printing each flow's drop rate.
 *
 * The trace and the queue are defined exactly as in the Rust example
 * crates/zl-aqm/examples/foreign_loop.rs, which drives zl_aqm::ZlRed directly; for the same
 * seed and packet count the two print the same bytes (CI diffs them):
 *
 *   - one arrival every GAP_NS = 1000 ns; the queue serves one packet every SERVICE_NS =
 *     1100 ns (10 % overload) and holds CAPACITY = 300 packets;
 *   - the flow of each arrival comes from a SplitMix64 stream seeded with `seed`: a draw r
 *     picks flow 0 (the heavy flow) when r % 100 < HEAVY_PERCENT = 3, else flow
 *     1 + (r >> 32) % (FLOWS - 1) with FLOWS = 300; the flow hash is flow * 0x9E3779B97F4A7C15;
 *   - ZL-RED (the paper's defaults) draws from a second SplitMix64 state seeded with
 *     seed ^ 0x6A09E667F3BCC909, kept here and advanced by zl_aqm_arrive.
 *
 * Build (from the repository root, after `cargo build -p zl-aqm-capi`):
 *   cc -O2 -Wall -Wextra -std=c11 -Icrates/zl-aqm-capi/include \
 *      crates/zl-aqm-capi/examples/c/zlred_trace.c \
 *      target/debug/libzl_aqm_capi.a -lpthread -ldl -lm -o target/zlred_trace
 * Run: target/zlred_trace [seed] [packets]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "zl_aqm.h"

#define GAP_NS 1000u
#define SERVICE_NS 1100u
#define CAPACITY 300u
#define FLOWS 300u
#define HEAVY_PERCENT 3u

struct flow_count {
    uint64_t arrivals;
    uint64_t drops;
};

static int check(ZlStatus s, const char *what)
{
    if (s != ZL_OK) {
        char msg[256];
        zl_last_error(msg, sizeof msg);
        fprintf(stderr, "%s: %s: %s\n", what, zl_status_name(s), msg);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
    uint64_t packets = argc > 2 ? strtoull(argv[2], NULL, 0) : 200000;

    ZlZlredParams params = zl_zlred_params_default();
    ZlQueueParams queue = {
        .capacity_packets = CAPACITY,
        .capacity_bytes = ZL_UNBOUNDED_BYTES,
        .link_rate_bps = 10000000000ull,
    };
    ZlAqm *aqm = NULL;
    if (check(zl_aqm_new_zlred(&params, &queue, NULL, &aqm), "zl_aqm_new_zlred"))
        return 1;

    static struct flow_count flows[FLOWS];
    uint64_t trace_rng = seed;
    uint64_t aqm_rng = seed ^ 0x6A09E667F3BCC909ull;
    uint32_t q = 0;
    uint64_t next_departure = 0;

    ZlArrival a = zl_arrival_default();
    a.packet_len = 1000;
    for (uint64_t k = 0; k < packets; k++) {
        uint64_t now = k * GAP_NS;
        while (q > 0 && next_departure <= now) {
            q--;
            if (q > 0)
                next_departure += SERVICE_NS;
        }
        uint64_t r = zl_rng_next(&trace_rng);
        uint32_t flow = r % 100 < HEAVY_PERCENT ? 0 : 1 + (uint32_t)((r >> 32) % (FLOWS - 1));

        a.flow_hash = (uint64_t)flow * 0x9E3779B97F4A7C15ull;
        a.now_ns = now;
        a.queue_packets = q;
        ZlVerdict v = zl_aqm_arrive(aqm, &a, &aqm_rng);
        if (v == ZL_VERDICT_INVALID_ARGUMENT) {
            check(ZL_ERR_PARAM, "zl_aqm_arrive");
            return 1;
        }
        flows[flow].arrivals++;
        if (v >= ZL_VERDICT_EARLY_DROP) {
            flows[flow].drops++;
        } else {
            if (q == 0)
                next_departure = now + SERVICE_NS;
            q++;
        }
    }

    ZlAqmStats st;
    double estimate;
    if (check(zl_aqm_stats(aqm, &st), "zl_aqm_stats")
        || check(zl_aqm_flow_estimate(aqm, &estimate), "zl_aqm_flow_estimate"))
        return 1;

    printf("# zl-red seed=%" PRIu64 " packets=%" PRIu64 " flows=%u capacity=%u\n", seed, packets,
           FLOWS, CAPACITY);
    printf("flow arrivals drops drop_ppm\n");
    for (uint32_t f = 0; f < FLOWS; f++) {
        uint64_t ppm = flows[f].arrivals ? flows[f].drops * 1000000 / flows[f].arrivals : 0;
        printf("%u %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", f, flows[f].arrivals, flows[f].drops,
               ppm);
    }
    printf("enqueued=%" PRIu64 " marked=%" PRIu64 " early_drops=%" PRIu64 " forced_drops=%" PRIu64
           " tail_drops=%" PRIu64 "\n",
           st.enqueued, st.marked, st.early_drops, st.forced_drops, st.tail_drops);
    /* 1/P(t) in thousandths, truncated: the same double gives the same integer in both. */
    if (estimate < 1e15)
        printf("estimated_flows_milli=%" PRIu64 "\n", (uint64_t)(estimate * 1000.0));
    else
        printf("estimated_flows_milli=inf\n");

    zl_aqm_free(aqm);
    return 0;
}
