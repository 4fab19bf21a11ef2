/*
 * bench_arrive: the cost of one ZL-RED decision called from C through the C ABI
 * (zl_aqm_arrive, one call per packet) against the same decision called from Rust (the loop
 * of zl_aqm_arrive_burst, which runs the same per-packet Rust code inside the library), in
 * the same run, on the same arrivals, with the same seed.
 *
 * The arrivals are precomputed (N = 65536, queue length 0..299 of a 300-packet queue, so
 * ZL-RED draws on most of them; 300 flows, one at 10x). Each pass replays them through a
 * fresh pair of policies; the two must give the same verdicts (checked). Reported: the best
 * of the passes, in ns per packet, for each way and their ratio.
 *
 * Build (release library: cargo build --release -p zl-aqm-capi):
 *   cc -O2 -std=c11 -Icrates/zl-aqm-capi/include \
 *      crates/zl-aqm-capi/examples/c/bench_arrive.c \
 *      target/release/libzl_aqm_capi.a -lpthread -ldl -lm -o target/bench_arrive
 * Run: target/bench_arrive [passes]     (0 passes: one replay each, for callgrind)
 */
#define _POSIX_C_SOURCE 199309L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zl_aqm.h"

#define N 65536u
#define FLOWS 300u

static ZlArrival arrivals[N];
static ZlVerdict by_call[N], by_burst[N];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static ZlAqm *policy(void)
{
    ZlZlredParams p = zl_zlred_params_default();
    ZlQueueParams q = {.capacity_packets = 300,
                       .capacity_bytes = ZL_UNBOUNDED_BYTES,
                       .link_rate_bps = 10000000000ull};
    ZlAqm *aqm = NULL;
    if (zl_aqm_new_zlred(&p, &q, NULL, &aqm) != ZL_OK) {
        char msg[256];
        zl_last_error(msg, sizeof msg);
        fprintf(stderr, "zl_aqm_new_zlred: %s\n", msg);
        exit(1);
    }
    return aqm;
}

/* One replay through the C ABI, a call per packet; returns seconds. */
static double by_calls(void)
{
    ZlAqm *aqm = policy();
    uint64_t rng = 12345;
    double t0 = now_s();
    for (uint32_t i = 0; i < N; i++)
        by_call[i] = zl_aqm_arrive(aqm, &arrivals[i], &rng);
    double t = now_s() - t0;
    zl_aqm_free(aqm);
    return t;
}

/* One replay by the library's own loop; returns seconds. */
static double by_bursts(void)
{
    ZlAqm *aqm = policy();
    uint64_t rng = 12345;
    double t0 = now_s();
    if (zl_aqm_arrive_burst(aqm, arrivals, N, &rng, by_burst) != ZL_OK)
        exit(1);
    double t = now_s() - t0;
    zl_aqm_free(aqm);
    return t;
}

int main(int argc, char **argv)
{
    int passes = argc > 1 ? atoi(argv[1]) : 50;
    uint64_t trace = 7;
    for (uint32_t i = 0; i < N; i++) {
        uint64_t r = zl_rng_next(&trace);
        uint32_t flow = r % 100 < 3 ? 0 : 1 + (uint32_t)((r >> 32) % (FLOWS - 1));
        arrivals[i] = zl_arrival_default();
        arrivals[i].flow_hash = (uint64_t)flow * 0x9E3779B97F4A7C15ull;
        arrivals[i].now_ns = (uint64_t)i * 1000;
        arrivals[i].queue_packets = (uint32_t)((r >> 16) % 300);
        arrivals[i].packet_len = 1000;
    }

    double best_call = 1e9, best_burst = 1e9;
    int rounds = passes > 0 ? passes : 1;
    for (int k = 0; k < rounds; k++) {
        double a = by_calls(), b = by_bursts();
        if (a < best_call)
            best_call = a;
        if (b < best_burst)
            best_burst = b;
        if (memcmp(by_call, by_burst, sizeof by_call) != 0) {
            fprintf(stderr, "the two ways gave different verdicts\n");
            return 1;
        }
    }
    uint64_t drops = 0;
    for (uint32_t i = 0; i < N; i++)
        drops += by_call[i] >= ZL_VERDICT_EARLY_DROP;
    printf("zl_aqm_arrive from C: %.2f ns/packet; Rust loop (zl_aqm_arrive_burst): %.2f "
           "ns/packet; ratio %.3f (best of %d passes of %u packets, %" PRIu64 " drops)\n",
           best_call * 1e9 / N, best_burst * 1e9 / N, best_call / best_burst, rounds, N, drops);
    return 0;
}
