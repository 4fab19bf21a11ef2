/* Out-of-line wrappers for DPDK's static-inline fast-path functions, which bindgen cannot
 * bind: rte_eth_rx_burst / rte_eth_tx_burst, the mbuf allocator and accessors, rte_errno.
 * Each is a one-line call; LTO is not assumed, so each costs one extra call per burst or
 * per mbuf. The fast path uses the two burst functions at the end instead, one call per
 * burst each way. */
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_mbuf.h>
#include <rte_red.h>
#include <stddef.h>
#include <string.h>

uint16_t zl_rte_eth_rx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **rx_pkts,
                             uint16_t nb_pkts)
{
    return rte_eth_rx_burst(port_id, queue_id, rx_pkts, nb_pkts);
}

uint16_t zl_rte_eth_tx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **tx_pkts,
                             uint16_t nb_pkts)
{
    return rte_eth_tx_burst(port_id, queue_id, tx_pkts, nb_pkts);
}

struct rte_mbuf *zl_rte_pktmbuf_alloc(struct rte_mempool *mp)
{
    return rte_pktmbuf_alloc(mp);
}

int zl_rte_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned count)
{
    return rte_pktmbuf_alloc_bulk(mp, mbufs, count);
}

void zl_rte_pktmbuf_free(struct rte_mbuf *m)
{
    rte_pktmbuf_free(m);
}

void zl_rte_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned count)
{
    rte_pktmbuf_free_bulk(mbufs, count);
}

void *zl_rte_pktmbuf_mtod(struct rte_mbuf *m)
{
    return rte_pktmbuf_mtod(m, void *);
}

uint16_t zl_rte_pktmbuf_data_len(const struct rte_mbuf *m)
{
    return rte_pktmbuf_data_len(m);
}

uint32_t zl_rte_pktmbuf_pkt_len(const struct rte_mbuf *m)
{
    return rte_pktmbuf_pkt_len(m);
}

uint16_t zl_rte_pktmbuf_tailroom(const struct rte_mbuf *m)
{
    return rte_pktmbuf_tailroom(m);
}

/* Appends `len` bytes to a single-segment mbuf; NULL when the tailroom is too small. */
char *zl_rte_pktmbuf_append(struct rte_mbuf *m, uint16_t len)
{
    return rte_pktmbuf_append(m, len);
}

uint16_t zl_rte_pktmbuf_nb_segs(const struct rte_mbuf *m)
{
    return m->nb_segs;
}

/* The RSS hash functions zlrouter asks for: IPv4/IPv6 addresses and TCP/UDP ports
 * (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP, macros bindgen cannot evaluate). The
 * caller masks them with the device's flow_type_rss_offloads. */
uint64_t zl_rss_hf_ip_tcp_udp(void)
{
    return RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP;
}

int zl_rte_errno(void)
{
    return rte_errno;
}

unsigned zl_rte_lcore_id(void)
{
    return rte_lcore_id();
}

unsigned zl_lcore_id_any(void)
{
    return LCORE_ID_ANY;
}

/* One call per receive burst: receives up to nb_pkts mbufs and reports each one's data
 * pointer and length (data[i] = NULL for a multi-segment mbuf, which the caller drops).
 * The caller frees the mbufs in bulk once it has copied them. */
uint16_t zl_rx_burst_frames(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **mbufs,
                            const uint8_t **data, uint16_t *lens, uint16_t nb_pkts)
{
    uint16_t n = rte_eth_rx_burst(port_id, queue_id, mbufs, nb_pkts);
    for (uint16_t i = 0; i < n; i++) {
        struct rte_mbuf *m = mbufs[i];
        data[i] = m->nb_segs == 1 ? rte_pktmbuf_mtod(m, const uint8_t *) : NULL;
        lens[i] = m->data_len;
    }
    return n;
}

/* One call per transmit burst: copies frames[i] (lens[i] bytes, each at most the pool's data
 * room, checked by the caller) into fresh single-segment mbufs from mp, transmits them and
 * frees what the driver does not take. One pass, each mbuf allocated, filled and copied into
 * in turn (measured no slower than rte_pktmbuf_alloc_bulk followed by a copy pass, which
 * touches every mbuf header twice). Returns the frames sent; *no_mbuf = frames left without
 * an mbuf (the pool ran dry), *ring_full = frames the driver refused. */
uint16_t zl_tx_burst_copy(uint16_t port_id, uint16_t queue_id, struct rte_mempool *mp,
                          const uint8_t *const *frames, const uint16_t *lens, uint16_t nb_pkts,
                          uint16_t *no_mbuf, uint16_t *ring_full)
{
    struct rte_mbuf *mbufs[64];
    uint16_t n = nb_pkts > 64 ? 64 : nb_pkts;
    uint16_t have = 0;
    while (have < n) {
        struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
        if (m == NULL)
            break;
        m->data_len = lens[have];
        m->pkt_len = lens[have];
        memcpy(rte_pktmbuf_mtod(m, void *), frames[have], lens[have]);
        mbufs[have++] = m;
    }
    uint16_t sent = have ? rte_eth_tx_burst(port_id, queue_id, mbufs, have) : 0;
    if (sent < have)
        rte_pktmbuf_free_bulk(&mbufs[sent], have - sent);
    *no_mbuf = (uint16_t)(nb_pkts - have);
    *ring_full = (uint16_t)(have - sent);
    return sent;
}

/* Where an mbuf keeps its buffer address and its data offset, so a received frame's bytes
 * (buf_addr + data_off) can be read without a call per access. */
size_t zl_mbuf_buf_addr_offset(void)
{
    return offsetof(struct rte_mbuf, buf_addr);
}

size_t zl_mbuf_data_off_offset(void)
{
    return offsetof(struct rte_mbuf, data_off);
}

/* One call per transmit burst that may hold received mbufs (zero-copy forwarding): lent[i],
 * when not NULL, is a single-segment mbuf sent as it is with its length set to lens[i];
 * otherwise frames[i] (lens[i] bytes, at most the pool's data room) is copied into a fresh
 * mbuf of mp. Order is kept; what the driver does not take is freed. Returns the frames sent;
 * *bytes = their bytes, *no_mbuf = frames left without an mbuf, *ring_full = frames the
 * driver refused. */
uint16_t zl_tx_burst_mixed(uint16_t port_id, uint16_t queue_id, struct rte_mempool *mp,
                           struct rte_mbuf *const *lent, const uint8_t *const *frames,
                           const uint16_t *lens, uint16_t nb_pkts, uint64_t *bytes,
                           uint16_t *no_mbuf, uint16_t *ring_full)
{
    struct rte_mbuf *mbufs[64];
    uint16_t out_lens[64];
    uint16_t n = nb_pkts > 64 ? 64 : nb_pkts;
    uint16_t have = 0, missing = 0;
    for (uint16_t i = 0; i < n; i++) {
        struct rte_mbuf *m = lent[i];
        if (m == NULL) {
            m = rte_pktmbuf_alloc(mp);
            if (m == NULL) {
                missing++;
                continue;
            }
            memcpy(rte_pktmbuf_mtod(m, void *), frames[i], lens[i]);
        }
        m->data_len = lens[i];
        m->pkt_len = lens[i];
        out_lens[have] = lens[i];
        mbufs[have++] = m;
    }
    uint16_t sent = have ? rte_eth_tx_burst(port_id, queue_id, mbufs, have) : 0;
    uint64_t b = 0;
    for (uint16_t i = 0; i < sent; i++)
        b += out_lens[i];
    if (sent < have)
        rte_pktmbuf_free_bulk(&mbufs[sent], have - sent);
    *bytes = b;
    *no_mbuf = (uint16_t)(missing + (nb_pkts - n));
    *ring_full = (uint16_t)(have - sent);
    return sent;
}

uint64_t zl_lpm_lookup_sum(const struct rte_lpm *lpm, const uint32_t *ips, uint32_t n) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nh;
        if (rte_lpm_lookup(lpm, ips[i], &nh) == 0)
            sum += nh;
    }
    return sum;
}

uint64_t zl_lpm_lookup_bulk_sum(const struct rte_lpm *lpm, const uint32_t *ips, uint32_t n,
                                uint32_t batch) {
    uint64_t sum = 0;
    uint32_t nh[64];
    if (batch > 64)
        batch = 64;
    for (uint32_t i = 0; i < n; i += batch) {
        uint32_t k = n - i < batch ? n - i : batch;
        rte_lpm_lookup_bulk(lpm, ips + i, nh, k);
        for (uint32_t j = 0; j < k; j++)
            if (nh[j] & RTE_LPM_LOOKUP_SUCCESS)
                sum += nh[j] & 0x00ffffff;
    }
    return sum;
}

uint64_t zl_lpm_lookupx4_sum(const struct rte_lpm *lpm, const uint32_t *ips, uint32_t n) {
    uint64_t sum = 0;
    uint32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t hop[4];
        rte_lpm_lookupx4(lpm, _mm_loadu_si128((const __m128i *)(ips + i)), hop, 0);
        sum += (uint64_t)hop[0] + hop[1] + hop[2] + hop[3];
    }
    return sum + zl_lpm_lookup_sum(lpm, ips + i, n - i);
}

uint64_t zl_lpm6_lookup_sum(const struct rte_lpm6 *lpm, const uint8_t *ips, uint32_t n) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nh;
        if (rte_lpm6_lookup(lpm, ips + 16 * (size_t)i, &nh) == 0)
            sum += nh;
    }
    return sum;
}

uint64_t zl_lpm6_lookup_bulk_sum(const struct rte_lpm6 *lpm, const uint8_t *ips, uint32_t n,
                                 uint32_t batch) {
    uint64_t sum = 0;
    int32_t nh[64];
    if (batch > 64)
        batch = 64;
    for (uint32_t i = 0; i < n; i += batch) {
        uint32_t k = n - i < batch ? n - i : batch;
        rte_lpm6_lookup_bulk_func(lpm, (uint8_t(*)[RTE_LPM6_IPV6_ADDR_SIZE])(ips + 16 * (size_t)i),
                                  nh, k);
        for (uint32_t j = 0; j < k; j++)
            if (nh[j] >= 0)
                sum += (uint32_t)nh[j];
    }
    return sum;
}

int zl_rte_red_enqueue(const struct rte_red_config *cfg, struct rte_red *red, unsigned q,
                       uint64_t time) {
    return rte_red_enqueue(cfg, red, q, time);
}
