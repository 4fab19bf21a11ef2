/* Out-of-line wrappers for DPDK's static-inline fast-path functions, which bindgen cannot
 * bind: rte_eth_rx_burst / rte_eth_tx_burst, the mbuf allocator and accessors, rte_errno.
 * Each is a one-line call; LTO is not assumed, so each costs one extra call per burst or
 * per mbuf. */
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

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

int zl_rte_errno(void)
{
    return rte_errno;
}
