/*
 * One Zombie List shared by several threads, each running its own ZL-RED policy on it (the
 * documented pattern: a zl_zombie_list is shared, a zl_aqm belongs to one thread), while the
 * main thread reads the list's statistics concurrently. Afterwards: every arrival was decided
 * and counted once, and 1/P(t) estimates the flow count all threads fed it.
 * Built and run by tests/c_abi.rs; exits 0 when every check holds.
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "zl_aqm.h"

#define THREADS 4
#define ARRIVALS 200000u
#define FLOWS 100u

struct worker {
    ZlZombieList *list;
    uint64_t seed;
    uint64_t decided;
    ZlAqmStats stats;
    int failed;
};

static atomic_int running;

static void *work(void *arg)
{
    struct worker *w = arg;
    ZlZlredParams p = zl_zlred_params_default();
    ZlQueueParams q = {.capacity_packets = 1000,
                       .capacity_bytes = ZL_UNBOUNDED_BYTES,
                       .link_rate_bps = 1000000000ull};
    ZlAqm *aqm = NULL;
    if (zl_aqm_new_zlred(&p, &q, w->list, &aqm) != ZL_OK) {
        w->failed = 1;
        atomic_fetch_sub(&running, 1);
        return NULL;
    }
    uint64_t rng = w->seed, trace = w->seed * 7 + 1;
    ZlArrival a = zl_arrival_default();
    for (uint32_t i = 0; i < ARRIVALS; i++) {
        uint64_t r = zl_rng_next(&trace);
        a.flow_hash = (r % FLOWS) * 0x9E3779B97F4A7C15ull;
        a.now_ns = (uint64_t)i * 100;
        a.queue_packets = (uint32_t)((r >> 20) % 1100); /* through every region, tail included */
        ZlVerdict v = zl_aqm_arrive(aqm, &a, &rng);
        if (v == ZL_VERDICT_INVALID_ARGUMENT)
            w->failed = 1;
        w->decided++;
    }
    if (zl_aqm_stats(aqm, &w->stats) != ZL_OK)
        w->failed = 1;
    zl_aqm_free(aqm);
    atomic_fetch_sub(&running, 1);
    return NULL;
}

int main(void)
{
    ZlZombieParams zp = zl_zombie_params_default();
    ZlZombieList *list = NULL;
    if (zl_zombie_list_new(&zp, &list) != ZL_OK)
        return 1;
    struct worker w[THREADS];
    pthread_t t[THREADS];
    atomic_store(&running, THREADS);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.list = list, .seed = 1000 + i};
        if (pthread_create(&t[i], NULL, work, &w[i]) != 0)
            return 1;
    }
    /* The control plane reads the shared list while the workers run. */
    uint64_t reads = 0;
    while (atomic_load(&running) > 0) {
        ZlZombieStats zs;
        if (zl_zombie_list_stats(list, &zs) != ZL_OK)
            return 1;
        reads++;
    }
    int failed = 0;
    uint64_t counted = 0, decided = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        failed |= w[i].failed;
        decided += w[i].decided;
        counted += w[i].stats.enqueued + w[i].stats.early_drops + w[i].stats.forced_drops
                   + w[i].stats.tail_drops;
        if (w[i].stats.tail_drops == 0 || w[i].stats.early_drops == 0)
            failed = 1;
    }
    ZlZombieStats zs;
    if (zl_zombie_list_stats(list, &zs) != ZL_OK)
        return 1;
    zl_zombie_list_free(list);
    printf("threads: %d workers, %" PRIu64 " decided, %" PRIu64 " counted, 1/P(t) = %.1f, "
           "T = %" PRIu64 ", %" PRIu64 " concurrent reads\n",
           THREADS, decided, counted, zs.estimated_flows, zs.total_occurrence, reads);
    if (failed || decided != (uint64_t)THREADS * ARRIVALS || counted != decided
        || !(zs.estimated_flows > FLOWS * 0.6 && zs.estimated_flows < FLOWS * 1.6)
        || zs.table_full_events != 0) {
        fprintf(stderr, "threads: check failed\n");
        return 1;
    }
    return 0;
}
