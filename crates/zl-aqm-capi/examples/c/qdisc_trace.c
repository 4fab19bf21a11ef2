/*
 * qdisc_trace: FQ-CoDel (or ZL-RED with flow isolation) through the C ABI (zl_aqm.h) holding
 * this program's packets, as opaque handles into its own packet pool, in front of a simulated
 * 100 Mbit/s link; prints what became of each flow's packets.
 *
 * The trace, the same in tests/qdisc_trace/mod.rs, which replays it through zl_aqm's
 * QueueDiscipline directly; tests/c_abi.rs compares the two outputs byte for byte:
 *
 *   - bulk arrivals of BULK_LEN = 1500 bytes, one every BULK_GAP_NS = 96 us (125 % of the
 *     link, which sends a byte every NS_PER_BYTE = 80 ns); a SplitMix64 stream seeded with
 *     `seed` picks each one's flow: a draw r picks flow 0 (a flood that ignores congestion
 *     signals) when r % 100 < HEAVY_PERCENT = 40, else flow 1 + (r >> 32) % 8; the even
 *     flows are ECN-capable (ECT(0)), the odd ones not;
 *   - flow 9 is sparse: one SPARSE_LEN = 100-byte packet every SPARSE_GAP_NS = 10 ms (a bulk
 *     arrival at the same time goes first);
 *   - flow f has flow hash (f + 1) * 0x9E3779B97F4A7C15, source host 1 + f, destination
 *     host 0;
 *   - the qdisc (CAPACITY = 500 packets) draws from a second SplitMix64 state seeded with
 *     seed ^ 0x6A09E667F3BCC909;
 *   - the link asks for a packet whenever it is free, before each arrival it precedes; the run
 *     ends at the last bulk arrival and zl_qdisc_free hands back what is still queued.
 *
 * Every handle the qdisc takes comes back once: from zl_qdisc_dequeue (sent), or through the
 * discard callback (dropped after it was taken, or still queued at the free); the pool must be
 * empty at the end (printed, and checked by the test).
 *
 * Build (from the repository root, after `cargo build -p zl-aqm-capi`):
 *   cc -O2 -Wall -Wextra -std=c11 -Icrates/zl-aqm-capi/include \
 *      crates/zl-aqm-capi/examples/c/qdisc_trace.c \
 *      target/debug/libzl_aqm_capi.a -lpthread -ldl -lm -o target/qdisc_trace
 * Run: target/qdisc_trace [seed] [bulk packets] [fq-codel|isolation]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zl_aqm.h"

#define NS_PER_BYTE 80u
#define BULK_LEN 1500u
#define BULK_GAP_NS 96000u
#define SPARSE_LEN 100u
#define SPARSE_GAP_NS 10000000u
#define HEAVY_PERCENT 40u
#define FLOWS 10u
#define SPARSE_FLOW 9u
#define CAPACITY 500u
/* FQ-CoDel holds one packet over its limit while it resolves an overflow; the isolation's
 * penalty queues hold a quarter of the capacity beside the normal queue. */
#define POOL (2 * CAPACITY)

static const char *const FQ_CODEL = "kind = \"fq-codel\"\n";
static const char *const ISOLATION = "kind = \"zl-red\"\n"
                                     "[isolation]\n";

struct packet {
    uint64_t serial; /* arrival number, the same in the Rust replay */
    uint32_t flow;
    uint32_t next_free;
};

struct flow_count {
    uint64_t arrivals, sent, marked, refused, discarded;
    uint64_t sojourn_ns, sojourn_max_ns;
};

struct sim {
    struct packet pool[POOL];
    uint32_t free_head, in_use;
    struct flow_count flows[FLOWS];
    uint64_t freed_at_end;
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

static uint64_t take_slot(struct sim *s, uint64_t serial, uint32_t flow)
{
    uint32_t h = s->free_head;
    if (h == UINT32_MAX) {
        /* More handles out than the qdisc can hold: one was never handed back. */
        fprintf(stderr, "packet pool exhausted: a handle was lost\n");
        exit(1);
    }
    s->free_head = s->pool[h].next_free;
    s->pool[h].serial = serial;
    s->pool[h].flow = flow;
    s->in_use++;
    return h;
}

static void free_slot(struct sim *s, uint64_t h)
{
    s->pool[h].next_free = s->free_head;
    s->free_head = (uint32_t)h;
    s->in_use--;
}

/* The discard callback: the qdisc hands back a packet it had taken and will not send. */
static void on_discard(void *ctx, uint64_t handle, ZlDiscardCause cause)
{
    struct sim *s = ctx;
    if (cause == ZL_DISCARD_FREE)
        s->freed_at_end++;
    else
        s->flows[s->pool[handle].flow].discarded++;
    free_slot(s, handle);
}

/* FNV-1a over a 64-bit word, byte by byte (low first). */
static uint64_t fnv(uint64_t h, uint64_t x)
{
    for (int i = 0; i < 8; i++) {
        h ^= (x >> (8 * i)) & 0xff;
        h *= 0x100000001B3ull;
    }
    return h;
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
    uint64_t packets = argc > 2 ? strtoull(argv[2], NULL, 0) : 200000;
    const char *mode = argc > 3 ? argv[3] : "fq-codel";
    const char *toml;
    if (strcmp(mode, "fq-codel") == 0)
        toml = FQ_CODEL;
    else if (strcmp(mode, "isolation") == 0)
        toml = ISOLATION;
    else {
        fprintf(stderr, "mode: fq-codel or isolation\n");
        return 2;
    }

    static struct sim s;
    for (uint32_t i = 0; i < POOL; i++)
        s.pool[i].next_free = i + 1 < POOL ? i + 1 : UINT32_MAX;
    s.free_head = 0;

    ZlQueueParams queue = {
        .capacity_packets = CAPACITY,
        .capacity_bytes = ZL_UNBOUNDED_BYTES,
        .link_rate_bps = 100000000ull,
    };
    ZlQdisc *q = NULL;
    if (check(zl_qdisc_new_from_toml(toml, &queue, NULL, on_discard, &s, &q),
              "zl_qdisc_new_from_toml"))
        return 1;

    uint64_t trace_rng = seed;
    uint64_t qdisc_rng = seed ^ 0x6A09E667F3BCC909ull;
    uint64_t link_free = 0, digest = 0xcbf29ce484222325ull, serial = 0;
    uint64_t bulk = 0, next_sparse = 0;
    ZlArrival a = zl_arrival_default();

    while (bulk < packets) {
        uint64_t next_bulk = bulk * BULK_GAP_NS;
        int sparse = next_sparse < next_bulk;
        uint64_t now = sparse ? next_sparse : next_bulk;

        /* The link sends what it can before this arrival. */
        while (link_free <= now) {
            ZlDeparture d;
            ZlDequeueStatus st = zl_qdisc_dequeue(q, link_free, &qdisc_rng, &d);
            if (st == ZL_DEQUEUE_PACKET) {
                struct packet *p = &s.pool[d.handle];
                struct flow_count *f = &s.flows[p->flow];
                uint64_t sojourn = link_free - d.enqueued_ns;
                f->sent++;
                f->marked += d.mark;
                f->sojourn_ns += sojourn;
                if (sojourn > f->sojourn_max_ns)
                    f->sojourn_max_ns = sojourn;
                digest = fnv(fnv(fnv(digest, p->serial), link_free), d.mark);
                free_slot(&s, d.handle);
                link_free += (uint64_t)d.packet_len * NS_PER_BYTE;
            } else if (st == ZL_DEQUEUE_HOLD) {
                link_free = d.hold_until_ns > link_free ? d.hold_until_ns : link_free + 1;
            } else if (st == ZL_DEQUEUE_EMPTY) {
                link_free = now;
                break;
            } else {
                check(ZL_ERR_PARAM, "zl_qdisc_dequeue");
                return 1;
            }
        }

        uint32_t flow;
        if (sparse) {
            flow = SPARSE_FLOW;
            a.packet_len = SPARSE_LEN;
            a.ecn = 0;
            next_sparse += SPARSE_GAP_NS;
        } else {
            uint64_t r = zl_rng_next(&trace_rng);
            flow = r % 100 < HEAVY_PERCENT ? 0 : 1 + (uint32_t)((r >> 32) % 8);
            a.packet_len = BULK_LEN;
            a.ecn = flow % 2 == 0 ? 2 : 0; /* ECT(0) or Not-ECT */
            bulk++;
        }
        a.flow_hash = (uint64_t)(flow + 1) * 0x9E3779B97F4A7C15ull;
        a.src_host = (uint16_t)(1 + flow);
        a.dst_host = 0;
        a.now_ns = now;
        s.flows[flow].arrivals++;
        uint64_t h = take_slot(&s, serial++, flow);
        ZlVerdict v = zl_qdisc_enqueue(q, &a, h, &qdisc_rng);
        if (v == ZL_VERDICT_INVALID_ARGUMENT) {
            check(ZL_ERR_PARAM, "zl_qdisc_enqueue");
            return 1;
        }
        if (v >= ZL_VERDICT_EARLY_DROP) {
            /* Not taken: still ours. */
            s.flows[flow].refused++;
            free_slot(&s, h);
        } else if (v == ZL_VERDICT_MARK) {
            s.flows[flow].marked++; /* set CE on the packet here */
        }
    }

    ZlQdiscStats st;
    if (check(zl_qdisc_stats(q, &st), "zl_qdisc_stats"))
        return 1;

    printf("# qdisc_trace %s seed=%" PRIu64 " packets=%" PRIu64 " capacity=%u\n", mode, seed,
           packets, CAPACITY);
    printf("flow arrivals sent marked refused discarded sojourn_avg_us sojourn_max_us\n");
    for (uint32_t i = 0; i < FLOWS; i++) {
        struct flow_count *f = &s.flows[i];
        uint64_t avg = f->sent ? f->sojourn_ns / f->sent / 1000 : 0;
        printf("%u %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
               " %" PRIu64 "\n",
               i, f->arrivals, f->sent, f->marked, f->refused, f->discarded, avg,
               f->sojourn_max_ns / 1000);
    }
    printf("enqueued=%" PRIu64 " marked_on_enqueue=%" PRIu64 " early_drops=%" PRIu64
           " forced_drops=%" PRIu64 " tail_drops=%" PRIu64 "\n",
           st.enqueued, st.marked_on_enqueue, st.early_drops, st.forced_drops, st.tail_drops);
    printf("dequeued=%" PRIu64 " marked_on_dequeue=%" PRIu64 " dequeue_drops=%" PRIu64
           " overflow_drops=%" PRIu64 "\n",
           st.dequeued, st.marked_on_dequeue, st.dequeue_drops, st.overflow_drops);
    if (st.kind == ZL_QDISC_FQ_CODEL)
        printf("fq-codel: new_flow_count=%" PRIu64 " drop_overlimit=%" PRIu64
               " ecn_marks=%" PRIu64 " codel_drops=%" PRIu64 "\n",
               st.fq_codel.new_flow_count, st.fq_codel.drop_overlimit, st.codel.ecn_marks,
               st.codel.dropped);
    else
        /* The fair share in bit/s, truncated: the same double gives the same integer. */
        printf("isolation: flagged=%" PRIu64 " penalized=%" PRIu64 " released=%" PRIu64
               " penalty_sent=%" PRIu64 " fair_share_bps=%" PRIu64 "\n",
               st.isolation.flagged, st.isolation.penalized, st.isolation.released,
               st.isolation.penalty_sent, (uint64_t)st.isolation.fair_share_bps);
    printf("departures_fnv=%016" PRIx64 "\n", digest);

    uint32_t queued;
    uint64_t queued_bytes;
    if (check(zl_qdisc_len(q, &queued, &queued_bytes), "zl_qdisc_len")
        || check(zl_qdisc_free(q), "zl_qdisc_free"))
        return 1;
    printf("queued_at_end=%u handed_back_at_free=%" PRIu64 " pool_in_use=%u\n", queued,
           s.freed_at_end, s.in_use);
    return s.in_use == 0 && s.freed_at_end == queued ? 0 : 1;
}
