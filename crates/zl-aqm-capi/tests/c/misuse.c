/*
 * Misuse of the C ABI from C: every null pointer and out-of-range parameter or field must come
 * back as an error code (with a message naming the argument), never as a crash, and must leave
 * no state changed. Also the ownership rules: handles freed in either order, null frees, a
 * qdisc's packet handles all handed back, a qdisc called from its own discard callback.
 * Built and run by tests/c_abi.rs; exits 0 when every check holds, else prints the failures.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "zl_aqm.h"

static int failures, checks;

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        checks++;                                                                              \
        if (!(cond)) {                                                                         \
            failures++;                                                                        \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);           \
        }                                                                                      \
    } while (0)

/* The last error message contains `needle`. */
static int error_says(const char *needle)
{
    char msg[512];
    size_t n = zl_last_error(msg, sizeof msg);
    if (n == 0 || strstr(msg, needle) == NULL) {
        fprintf(stderr, "  last error \"%s\" does not mention \"%s\"\n", msg, needle);
        return 0;
    }
    return 1;
}

static ZlQueueParams queue(void)
{
    ZlQueueParams q = {
        .capacity_packets = 1000,
        .capacity_bytes = ZL_UNBOUNDED_BYTES,
        .link_rate_bps = 1000000000ull,
    };
    return q;
}

static void null_pointers(void)
{
    ZlQueueParams q = queue();
    ZlZlredParams zp = zl_zlred_params_default();
    ZlRedParams rp = zl_red_params_default();
    ZlSredParams sp = zl_sred_params_default();
    ZlZombieParams mp = zl_zombie_params_default();
    ZlAqm *aqm = (ZlAqm *)0x1; /* must be overwritten with NULL on failure */
    ZlZombieList *list = (ZlZombieList *)0x1;

    CHECK(zl_zombie_list_new(NULL, &list) == ZL_ERR_NULL && list == NULL);
    CHECK(error_says("params is null"));
    CHECK(zl_zombie_list_new(&mp, NULL) == ZL_ERR_NULL);
    CHECK(zl_aqm_new_zlred(NULL, &q, NULL, &aqm) == ZL_ERR_NULL && aqm == NULL);
    CHECK(error_says("params is null"));
    aqm = (ZlAqm *)0x1;
    CHECK(zl_aqm_new_zlred(&zp, NULL, NULL, &aqm) == ZL_ERR_NULL && aqm == NULL);
    CHECK(error_says("queue is null"));
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, NULL) == ZL_ERR_NULL);
    CHECK(zl_aqm_new_red(NULL, &q, &aqm) == ZL_ERR_NULL);
    CHECK(zl_aqm_new_red(&rp, NULL, &aqm) == ZL_ERR_NULL);
    CHECK(zl_aqm_new_red(&rp, &q, NULL) == ZL_ERR_NULL);
    CHECK(zl_aqm_new_sred(NULL, &q, NULL, &aqm) == ZL_ERR_NULL);
    CHECK(zl_aqm_new_sred(&sp, &q, NULL, NULL) == ZL_ERR_NULL);
    CHECK(zl_aqm_new_from_toml(NULL, &q, NULL, &aqm) == ZL_ERR_NULL);
    CHECK(error_says("toml is null"));
    CHECK(zl_aqm_new_from_toml("kind = \"red\"", NULL, NULL, &aqm) == ZL_ERR_NULL);

    ZlArrival a = zl_arrival_default();
    uint64_t rng = 1;
    ZlAqmStats st;
    double flows;
    ZlAqmKind kind;
    ZlZombieStats zs;
    CHECK(zl_aqm_arrive(NULL, &a, &rng) == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(error_says("null"));
    CHECK(zl_aqm_stats(NULL, &st) == ZL_ERR_NULL);
    CHECK(zl_aqm_flow_estimate(NULL, &flows) == ZL_ERR_NULL);
    CHECK(zl_aqm_kind(NULL, &kind) == ZL_ERR_NULL);
    CHECK(zl_zombie_list_stats(NULL, &zs) == ZL_ERR_NULL);
    CHECK(zl_aqm_arrive_burst(NULL, &a, 1, &rng, NULL) == ZL_ERR_NULL);
    CHECK(zl_rng_next(NULL) == 0);
    zl_aqm_free(NULL);
    zl_zombie_list_free(NULL);

    /* A live policy with null arguments: nothing counted, rng untouched. */
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, &aqm) == ZL_OK && aqm != NULL);
    CHECK(zl_aqm_arrive(aqm, NULL, &rng) == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(zl_aqm_arrive(aqm, &a, NULL) == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(zl_aqm_stats(aqm, NULL) == ZL_ERR_NULL);
    CHECK(error_says("out is null"));
    CHECK(zl_aqm_flow_estimate(aqm, NULL) == ZL_ERR_NULL);
    CHECK(zl_aqm_kind(aqm, NULL) == ZL_ERR_NULL);
    ZlVerdict v[2];
    CHECK(zl_aqm_arrive_burst(aqm, NULL, 2, &rng, v) == ZL_ERR_NULL);
    CHECK(zl_aqm_arrive_burst(aqm, &a, 1, &rng, NULL) == ZL_ERR_NULL);
    CHECK(zl_aqm_arrive_burst(aqm, NULL, 0, &rng, NULL) == ZL_OK);
    CHECK(zl_aqm_depart(NULL, &a) == ZL_ERR_NULL);
    CHECK(zl_aqm_depart(aqm, NULL) == ZL_ERR_NULL);
    CHECK(zl_aqm_depart(aqm, &a) == ZL_OK);
    CHECK(zl_aqm_stats(aqm, &st) == ZL_OK);
    CHECK(st.enqueued + st.early_drops + st.forced_drops + st.tail_drops == 0);
    CHECK(rng == 1);
    zl_aqm_free(aqm);
}

static void out_of_range_parameters(void)
{
    ZlQueueParams q = queue();
    ZlAqm *aqm = NULL;

    ZlZlredParams zp = zl_zlred_params_default();
    zp.p_max = 0.0;
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, &aqm) == ZL_ERR_PARAM && aqm == NULL);
    CHECK(error_says("p_max"));
    zp = zl_zlred_params_default();
    zp.p_max = NAN;
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, &aqm) == ZL_ERR_PARAM);
    zp = zl_zlred_params_default();
    zp.th_min = 400; /* >= B/3 = 333.3 */
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("th_min"));
    zp = zl_zlred_params_default();
    zp.a = 0.5;
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("a"));
    zp = zl_zlred_params_default();
    zp.ecn = 2;
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("ecn = 2"));
    zp = zl_zlred_params_default();
    zp.zombie.m = 0;
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("zombie.m"));
    zp = zl_zlred_params_default();
    zp.zombie.m = 1u << 23; /* above MAX_M */
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, &aqm) == ZL_ERR_PARAM);
    zp = zl_zlred_params_default();
    zp.zombie.p_swap = 1.5;
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("p_swap"));
    zp = zl_zlred_params_default();
    zp.zombie.alpha = -1;
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, &aqm) == ZL_ERR_PARAM);
    zp = zl_zlred_params_default();
    zp.zombie.occurrence = 2;
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("occurrence"));

    /* The queue. */
    zp = zl_zlred_params_default();
    ZlQueueParams bad = q;
    bad.capacity_packets = 0;
    CHECK(zl_aqm_new_zlred(&zp, &bad, NULL, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("capacity_packets"));
    bad = q;
    bad.capacity_packets = ZL_UNBOUNDED_PACKETS; /* ZL-RED needs a finite B */
    CHECK(zl_aqm_new_zlred(&zp, &bad, NULL, &aqm) == ZL_ERR_PARAM);
    bad = q;
    bad.capacity_bytes = 0;
    CHECK(zl_aqm_new_zlred(&zp, &bad, NULL, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("capacity_bytes"));

    ZlRedParams rp = zl_red_params_default();
    rp.max_th = rp.min_th;
    CHECK(zl_aqm_new_red(&rp, &q, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("max_th"));
    rp = zl_red_params_default();
    rp.w_q = 2;
    CHECK(zl_aqm_new_red(&rp, &q, &aqm) == ZL_ERR_PARAM);
    rp = zl_red_params_default();
    rp.unit = 3;
    CHECK(zl_aqm_new_red(&rp, &q, &aqm) == ZL_ERR_PARAM);
    rp = zl_red_params_default();
    bad = q;
    bad.link_rate_bps = 0;
    CHECK(zl_aqm_new_red(&rp, &bad, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("link_rate_bps"));

    ZlSredParams sp = zl_sred_params_default();
    sp.p_max = 1.01;
    CHECK(zl_aqm_new_sred(&sp, &q, NULL, &aqm) == ZL_ERR_PARAM);

    ZlPieParams pp = zl_pie_params_default();
    CHECK(zl_aqm_new_pie(NULL, &q, &aqm) == ZL_ERR_NULL && aqm == NULL);
    CHECK(zl_aqm_new_pie(&pp, NULL, &aqm) == ZL_ERR_NULL);
    CHECK(zl_aqm_new_pie(&pp, &q, NULL) == ZL_ERR_NULL);
    pp.target_ms = 0;
    CHECK(zl_aqm_new_pie(&pp, &q, &aqm) == ZL_ERR_PARAM && aqm == NULL);
    CHECK(error_says("target_ms"));
    pp = zl_pie_params_default();
    pp.dq_threshold_bytes = 100;
    CHECK(zl_aqm_new_pie(&pp, &q, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("dq_threshold_bytes"));
    pp = zl_pie_params_default();
    pp.estimator = 2;
    CHECK(zl_aqm_new_pie(&pp, &q, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("estimator = 2"));
    pp = zl_pie_params_default();
    pp.ecn = 9;
    CHECK(zl_aqm_new_pie(&pp, &q, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("ecn = 9"));
    pp = zl_pie_params_default();
    pp.alpha = NAN;
    CHECK(zl_aqm_new_pie(&pp, &q, &aqm) == ZL_ERR_PARAM);

    ZlZombieParams mp = zl_zombie_params_default();
    ZlZombieList *list = NULL;
    mp.m = 0;
    CHECK(zl_zombie_list_new(&mp, &list) == ZL_ERR_PARAM && list == NULL);

    /* TOML: not TOML, unknown kind, unknown key, out-of-range value. */
    CHECK(zl_aqm_new_from_toml("kind = ", &q, NULL, &aqm) == ZL_ERR_CONFIG && aqm == NULL);
    CHECK(zl_aqm_new_from_toml("kind = \"blue\"", &q, NULL, &aqm) == ZL_ERR_CONFIG);
    CHECK(error_says("blue"));
    /* A discipline that holds its own queues is a ZlQdisc. */
    CHECK(zl_aqm_new_from_toml("kind = \"codel\"", &q, NULL, &aqm) == ZL_ERR_CONFIG);
    CHECK(error_says("zl_qdisc_new_from_toml"));
    CHECK(zl_aqm_new_from_toml("kind = \"zl-red\"\n[isolation]\n", &q, NULL, &aqm)
          == ZL_ERR_CONFIG);
    CHECK(error_says("isolation"));
    CHECK(zl_aqm_new_from_toml("kind = \"pie\"\ntarget_ms = -1", &q, NULL, &aqm)
          == ZL_ERR_PARAM);
    CHECK(error_says("target_ms"));
    CHECK(zl_aqm_new_from_toml("kind = \"red\"\nmin_thresh = 3", &q, NULL, &aqm)
          == ZL_ERR_CONFIG);
    CHECK(error_says("min_thresh"));
    CHECK(zl_aqm_new_from_toml("kind = \"red\"\nmax_p = 0", &q, NULL, &aqm) == ZL_ERR_PARAM);
    CHECK(error_says("max_p"));
    CHECK(zl_aqm_new_from_toml("kind = \"red\"\n\xff = 1", &q, NULL, &aqm) == ZL_ERR_CONFIG);
}

static void out_of_range_arrivals(void)
{
    ZlQueueParams q = queue();
    ZlZlredParams zp = zl_zlred_params_default();
    ZlAqm *aqm = NULL;
    CHECK(zl_aqm_new_zlred(&zp, &q, NULL, &aqm) == ZL_OK);
    uint64_t rng = 42;
    ZlArrival a = zl_arrival_default();
    a.queue_packets = 500; /* above B/3: a valid arrival would draw */

    a.ecn = 4;
    CHECK(zl_aqm_arrive(aqm, &a, &rng) == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(error_says("ecn = 4"));
    a.ecn = 0;
    a.color = 3;
    CHECK(zl_aqm_arrive(aqm, &a, &rng) == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(error_says("color = 3"));
    a.color = 0;
    a.priority = 16;
    CHECK(zl_aqm_arrive(aqm, &a, &rng) == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(error_says("priority = 16"));
    a.priority = 0;
    a.has_cc_ext = 255;
    CHECK(zl_aqm_arrive(aqm, &a, &rng) == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(error_says("has_cc_ext"));
    CHECK(zl_aqm_depart(aqm, &a) == ZL_ERR_PARAM);
    CHECK(error_says("has_cc_ext"));
    a.has_cc_ext = 0;
    a.now_ns = ZL_MAX_NOW_NS + 1; /* a policy's now + interval could overflow */
    CHECK(zl_aqm_arrive(aqm, &a, &rng) == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(error_says("now_ns"));
    CHECK(zl_aqm_depart(aqm, &a) == ZL_ERR_PARAM);
    a.now_ns = ZL_MAX_NOW_NS;
    a.src_host = 0xffff; /* every host hash is valid */
    a.dst_host = 0xffff;

    /* Nothing was counted, nothing drawn, the list saw nothing. */
    ZlAqmStats st;
    CHECK(zl_aqm_stats(aqm, &st) == ZL_OK);
    CHECK(st.enqueued + st.early_drops + st.forced_drops + st.tail_drops == 0);
    CHECK(rng == 42);
    double flows = 0;
    CHECK(zl_aqm_flow_estimate(aqm, &flows) == ZL_OK && isinf(flows));

    /* A burst with one bad arrival: the others are decided, the bad one is flagged. */
    ZlArrival burst[3] = {a, a, a};
    burst[1].ecn = 9;
    ZlVerdict v[3];
    CHECK(zl_aqm_arrive_burst(aqm, burst, 3, &rng, v) == ZL_ERR_PARAM);
    CHECK(v[1] == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(v[0] != ZL_VERDICT_INVALID_ARGUMENT && v[2] != ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(zl_aqm_stats(aqm, &st) == ZL_OK);
    CHECK(st.enqueued + st.early_drops + st.forced_drops + st.tail_drops == 2);

    /* A full queue is a tail drop, a valid arrival. */
    a.queue_packets = 1000;
    CHECK(zl_aqm_arrive(aqm, &a, &rng) == ZL_VERDICT_TAIL_DROP);
    zl_aqm_free(aqm);
}

static void ownership_and_kinds(void)
{
    ZlQueueParams q = queue();
    ZlZombieParams mp = zl_zombie_params_default();
    ZlZombieList *list = NULL;
    CHECK(zl_zombie_list_new(&mp, &list) == ZL_OK && list != NULL);

    ZlZlredParams zp = zl_zlred_params_default();
    ZlSredParams sp = zl_sred_params_default();
    ZlAqm *zl = NULL, *sred = NULL, *red = NULL, *toml = NULL;
    CHECK(zl_aqm_new_zlred(&zp, &q, list, &zl) == ZL_OK);
    CHECK(zl_aqm_new_sred(&sp, &q, list, &sred) == ZL_OK);
    ZlRedParams rp = zl_red_params_default();
    CHECK(zl_aqm_new_red(&rp, &q, &red) == ZL_OK);
    CHECK(zl_aqm_new_from_toml("kind = \"nonlinear-red\"", &q, NULL, &toml) == ZL_OK);

    ZlAqmKind k;
    CHECK(zl_aqm_kind(zl, &k) == ZL_OK && k == ZL_AQM_ZL_RED);
    CHECK(zl_aqm_kind(sred, &k) == ZL_OK && k == ZL_AQM_SRED);
    CHECK(zl_aqm_kind(red, &k) == ZL_OK && k == ZL_AQM_RED);
    CHECK(zl_aqm_kind(toml, &k) == ZL_OK && k == ZL_AQM_NONLINEAR_RED);
    ZlPieParams pp = zl_pie_params_default();
    ZlAqm *pie = NULL;
    CHECK(zl_aqm_new_pie(&pp, &q, &pie) == ZL_OK && pie != NULL);
    CHECK(zl_aqm_kind(pie, &k) == ZL_OK && k == ZL_AQM_PIE);
    CHECK(zl_aqm_flow_estimate(pie, &(double){0}) == ZL_ERR_NO_ZOMBIE_LIST);
    zl_aqm_free(pie);
    double flows = -1;
    CHECK(zl_aqm_flow_estimate(red, &flows) == ZL_ERR_NO_ZOMBIE_LIST && flows == -1);

    /* Free the list handle first: the two policies keep the shared list alive. */
    zl_zombie_list_free(list);
    uint64_t rng = 7;
    ZlArrival a = zl_arrival_default();
    for (uint64_t i = 0; i < 20000; i++) {
        a.flow_hash = i % 10;
        a.now_ns = i;
        CHECK(zl_aqm_arrive(i % 2 ? zl : sred, &a, &rng) == ZL_VERDICT_ENQUEUE);
    }
    /* Both fed the one list: ten flows, so 1/P(t) is near 10. */
    double f1 = 0, f2 = 0;
    CHECK(zl_aqm_flow_estimate(zl, &f1) == ZL_OK && zl_aqm_flow_estimate(sred, &f2) == ZL_OK);
    CHECK(f1 == f2 && f1 > 7 && f1 < 14);
    zl_aqm_free(sred);
    zl_aqm_free(zl);
    zl_aqm_free(red);
    zl_aqm_free(toml);

    CHECK(strcmp(zl_status_name(ZL_ERR_PARAM), "ZL_ERR_PARAM") == 0);
    CHECK(strcmp(zl_status_name(ZL_ERR_REENTRANT), "ZL_ERR_REENTRANT") == 0);
    CHECK(strcmp(zl_status_name(-3), "unknown status") == 0);
    /* The library is the ABI this header describes. */
    char abi[32];
    snprintf(abi, sizeof abi, "%u.%u.", ZL_AQM_CAPI_VERSION_MAJOR, ZL_AQM_CAPI_VERSION_MINOR);
    CHECK(strncmp(zl_aqm_capi_version(), abi, strlen(abi)) == 0);
    /* zl_last_error sizes like snprintf. */
    zl_aqm_new_zlred(NULL, &q, NULL, &zl);
    char tiny[4];
    size_t n = zl_last_error(tiny, sizeof tiny);
    CHECK(n == strlen("params is null") && strcmp(tiny, "par") == 0);
    CHECK(zl_last_error(NULL, 0) == n);
}

/* A discard callback that records what it is handed; with `reenter` set it also calls back
 * into its own qdisc, every call of which must be refused. */
struct collected {
    ZlQdisc *q;
    int reenter;
    uint64_t handles[64];
    ZlDiscardCause causes[64];
    int n;
    int reentry_refused;
};

static void collect(void *ctx, uint64_t handle, ZlDiscardCause cause)
{
    struct collected *c = ctx;
    if (c->n < 64) {
        c->handles[c->n] = handle;
        c->causes[c->n] = cause;
    }
    c->n++;
    if (c->reenter) {
        ZlArrival a = zl_arrival_default();
        uint64_t rng = 1;
        ZlDeparture d;
        uint32_t p;
        uint64_t b;
        ZlQdiscStats st;
        ZlQdiscKind k;
        int refused = zl_qdisc_enqueue(c->q, &a, 99, &rng) == ZL_VERDICT_INVALID_ARGUMENT
                      && error_says("discard callback")
                      && zl_qdisc_dequeue(c->q, 0, &rng, &d) == ZL_DEQUEUE_INVALID_ARGUMENT
                      && zl_qdisc_len(c->q, &p, &b) == ZL_ERR_REENTRANT
                      && zl_qdisc_stats(c->q, &st) == ZL_ERR_REENTRANT
                      && zl_qdisc_kind(c->q, &k) == ZL_ERR_REENTRANT
                      && zl_qdisc_free(c->q) == ZL_ERR_REENTRANT && rng == 1;
        c->reentry_refused += refused;
    }
}

static void qdisc_misuse(void)
{
    ZlQueueParams q = queue();
    struct collected col = {0};
    ZlQdisc *qd = (ZlQdisc *)0x1;
    const char *fq = "kind = \"fq-codel\"";

    /* Null pointers. */
    CHECK(zl_qdisc_new_from_toml(NULL, &q, NULL, collect, &col, &qd) == ZL_ERR_NULL
          && qd == NULL);
    CHECK(error_says("toml is null"));
    qd = (ZlQdisc *)0x1;
    CHECK(zl_qdisc_new_from_toml(fq, NULL, NULL, collect, &col, &qd) == ZL_ERR_NULL
          && qd == NULL);
    CHECK(error_says("queue is null"));
    CHECK(zl_qdisc_new_from_toml(fq, &q, NULL, NULL, &col, &qd) == ZL_ERR_NULL && qd == NULL);
    CHECK(error_says("on_discard is null"));
    CHECK(zl_qdisc_new_from_toml(fq, &q, NULL, collect, &col, NULL) == ZL_ERR_NULL);

    /* Kinds, keys and parameters. */
    CHECK(zl_qdisc_new_from_toml("kind = \"red\"", &q, NULL, collect, &col, &qd)
          == ZL_ERR_CONFIG && qd == NULL);
    CHECK(error_says("zl_aqm_new_from_toml"));
    CHECK(zl_qdisc_new_from_toml("kind = \"zl-red\"", &q, NULL, collect, &col, &qd)
          == ZL_ERR_CONFIG);
    CHECK(error_says("isolation"));
    CHECK(zl_qdisc_new_from_toml("kind = \"fq-codel\"\nflow = 3", &q, NULL, collect, &col,
                                 &qd) == ZL_ERR_CONFIG);
    CHECK(error_says("flow"));
    CHECK(zl_qdisc_new_from_toml("kind = \"fq-codel\"\nflows = 0", &q, NULL, collect, &col,
                                 &qd) == ZL_ERR_PARAM);
    CHECK(error_says("flows"));
    CHECK(zl_qdisc_new_from_toml("kind = \"codel\"\ntarget_ms = 200", &q, NULL, collect, &col,
                                 &qd) == ZL_ERR_PARAM);
    CHECK(error_says("interval_ms"));
    CHECK(zl_qdisc_new_from_toml("kind = \"dualpi2\"\ncoupling = 0.5", &q, NULL, collect,
                                 &col, &qd) == ZL_ERR_PARAM);
    CHECK(error_says("coupling"));
    CHECK(zl_qdisc_new_from_toml("kind = \"zl-red\"\n[isolation]\nmax_flows = 0", &q, NULL,
                                 collect, &col, &qd) == ZL_ERR_PARAM);
    CHECK(error_says("isolation.max_flows"));
    CHECK(zl_qdisc_new_from_toml("kind = \"zl-red\"\n[isolation]\nby = \"vlan\"", &q, NULL,
                                 collect, &col, &qd) == ZL_ERR_CONFIG);
    ZlQueueParams bad = q;
    bad.capacity_packets = ZL_UNBOUNDED_PACKETS; /* its slots are reserved up front */
    CHECK(zl_qdisc_new_from_toml(fq, &bad, NULL, collect, &col, &qd) == ZL_ERR_PARAM);
    CHECK(error_says("capacity_packets"));
    bad.capacity_packets = ZL_QDISC_MAX_PACKETS + 1;
    CHECK(zl_qdisc_new_from_toml(fq, &bad, NULL, collect, &col, &qd) == ZL_ERR_PARAM);
    bad.capacity_packets = 0;
    CHECK(zl_qdisc_new_from_toml(fq, &bad, NULL, collect, &col, &qd) == ZL_ERR_PARAM);
    bad = q;
    bad.capacity_bytes = 0;
    CHECK(zl_qdisc_new_from_toml(fq, &bad, NULL, collect, &col, &qd) == ZL_ERR_PARAM);
    CHECK(qd == NULL);

    /* A live qdisc of four packets: null and out-of-range arguments change nothing. */
    ZlQueueParams small = q;
    small.capacity_packets = 4;
    CHECK(zl_qdisc_new_from_toml(fq, &small, NULL, collect, &col, &qd) == ZL_OK && qd != NULL);
    col.q = qd;
    ZlArrival a = zl_arrival_default();
    a.packet_len = 100;
    uint64_t rng = 3;
    ZlDeparture d = {.handle = 42, .mark = 9};
    CHECK(zl_qdisc_enqueue(NULL, &a, 1, &rng) == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(error_says("qdisc is null"));
    CHECK(zl_qdisc_enqueue(qd, NULL, 1, &rng) == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(zl_qdisc_enqueue(qd, &a, 1, NULL) == ZL_VERDICT_INVALID_ARGUMENT);
    a.ecn = 4;
    CHECK(zl_qdisc_enqueue(qd, &a, 1, &rng) == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(error_says("ecn = 4"));
    a.ecn = 0;
    a.now_ns = ZL_MAX_NOW_NS + 1;
    CHECK(zl_qdisc_enqueue(qd, &a, 1, &rng) == ZL_VERDICT_INVALID_ARGUMENT);
    CHECK(error_says("now_ns"));
    a.now_ns = 0;
    CHECK(zl_qdisc_dequeue(NULL, 0, &rng, &d) == ZL_DEQUEUE_INVALID_ARGUMENT);
    CHECK(zl_qdisc_dequeue(qd, 0, NULL, &d) == ZL_DEQUEUE_INVALID_ARGUMENT);
    CHECK(zl_qdisc_dequeue(qd, 0, &rng, NULL) == ZL_DEQUEUE_INVALID_ARGUMENT);
    CHECK(zl_qdisc_dequeue(qd, ZL_MAX_NOW_NS + 1, &rng, &d) == ZL_DEQUEUE_INVALID_ARGUMENT);
    CHECK(error_says("now_ns"));
    CHECK(d.handle == 42 && d.mark == 9); /* untouched */
    uint32_t packets = 7;
    uint64_t bytes = 7;
    ZlQdiscStats st;
    ZlQdiscKind kind;
    CHECK(zl_qdisc_len(NULL, &packets, &bytes) == ZL_ERR_NULL);
    CHECK(zl_qdisc_len(qd, NULL, &bytes) == ZL_ERR_NULL);
    CHECK(zl_qdisc_len(qd, &packets, NULL) == ZL_ERR_NULL);
    CHECK(zl_qdisc_stats(NULL, &st) == ZL_ERR_NULL);
    CHECK(zl_qdisc_stats(qd, NULL) == ZL_ERR_NULL);
    CHECK(zl_qdisc_kind(NULL, &kind) == ZL_ERR_NULL);
    CHECK(zl_qdisc_kind(qd, NULL) == ZL_ERR_NULL);
    CHECK(zl_qdisc_kind(qd, &kind) == ZL_OK && kind == ZL_QDISC_FQ_CODEL);
    CHECK(zl_qdisc_len(qd, &packets, &bytes) == ZL_OK && packets == 0 && bytes == 0);
    CHECK(zl_qdisc_stats(qd, &st) == ZL_OK && st.enqueued == 0 && st.kind == ZL_QDISC_FQ_CODEL);
    CHECK(rng == 3 && col.n == 0);
    CHECK(zl_qdisc_dequeue(qd, 0, &rng, &d) == ZL_DEQUEUE_EMPTY);
    CHECK(d.handle == 0 && d.enqueued_ns == ZL_NO_TIME && d.hold_until_ns == ZL_NO_TIME);

    /* One flow over the limit: the fifth arrival makes FQ-CoDel drop from the head of the
     * fattest queue until half its bytes are gone (three of its five 100-byte packets), and
     * the callback's calls back into the qdisc are refused. */
    col.reenter = 1;
    for (uint64_t h = 1; h <= 5; h++) {
        a.now_ns = h;
        CHECK(zl_qdisc_enqueue(qd, &a, h, &rng) == ZL_VERDICT_ENQUEUE);
    }
    CHECK(col.n == 3 && col.reentry_refused == 3);
    for (int i = 0; i < 3; i++)
        CHECK(col.handles[i] == (uint64_t)i + 1 && col.causes[i] == ZL_DISCARD_OVERFLOW);
    col.reenter = 0;
    /* The qdisc works on after the refused calls. */
    CHECK(zl_qdisc_len(qd, &packets, &bytes) == ZL_OK && packets == 2 && bytes == 200);
    CHECK(zl_qdisc_dequeue(qd, 10, &rng, &d) == ZL_DEQUEUE_PACKET && d.handle == 4
          && d.enqueued_ns == 4 && d.packet_len == 100 && d.mark == 0
          && d.hold_until_ns == ZL_NO_TIME);
    CHECK(zl_qdisc_stats(qd, &st) == ZL_OK && st.enqueued == 5 && st.overflow_drops == 3
          && st.dequeued == 1 && st.fq_codel.drop_overlimit == 3);
    /* Free hands back the one still queued. */
    col.n = 0;
    CHECK(zl_qdisc_free(qd) == ZL_OK);
    CHECK(col.n == 1 && col.handles[0] == 5 && col.causes[0] == ZL_DISCARD_FREE);
    CHECK(zl_qdisc_free(NULL) == ZL_OK);

    /* The isolation on a shared list; the list handle may go first. */
    ZlZombieParams mp = zl_zombie_params_default();
    ZlZombieList *list = NULL;
    CHECK(zl_zombie_list_new(&mp, &list) == ZL_OK);
    CHECK(zl_qdisc_new_from_toml("kind = \"zl-red\"\n[isolation]\nby = \"dsthost\"", &q, list,
                                 collect, &col, &qd) == ZL_OK);
    zl_zombie_list_free(list);
    CHECK(zl_qdisc_kind(qd, &kind) == ZL_OK && kind == ZL_QDISC_ZL_RED_ISOLATION);
    a.dst_host = 7;
    CHECK(zl_qdisc_enqueue(qd, &a, 11, &rng) == ZL_VERDICT_ENQUEUE);
    CHECK(zl_qdisc_dequeue(qd, 20, &rng, &d) == ZL_DEQUEUE_PACKET && d.handle == 11);
    col.n = 0;
    CHECK(zl_qdisc_free(qd) == ZL_OK && col.n == 0);
}

int main(void)
{
    null_pointers();
    out_of_range_parameters();
    out_of_range_arrivals();
    ownership_and_kinds();
    qdisc_misuse();
    if (failures) {
        fprintf(stderr, "misuse: %d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("misuse: all %d checks passed\n", checks);
    return 0;
}
