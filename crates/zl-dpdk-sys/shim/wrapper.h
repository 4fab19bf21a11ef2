#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_dev.h>
#include <rte_bus.h>

uint16_t zl_rte_eth_rx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **rx_pkts,
                             uint16_t nb_pkts);
uint16_t zl_rte_eth_tx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **tx_pkts,
                             uint16_t nb_pkts);
struct rte_mbuf *zl_rte_pktmbuf_alloc(struct rte_mempool *mp);
int zl_rte_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned count);
void zl_rte_pktmbuf_free(struct rte_mbuf *m);
void zl_rte_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned count);
void *zl_rte_pktmbuf_mtod(struct rte_mbuf *m);
uint16_t zl_rte_pktmbuf_data_len(const struct rte_mbuf *m);
uint32_t zl_rte_pktmbuf_pkt_len(const struct rte_mbuf *m);
uint16_t zl_rte_pktmbuf_tailroom(const struct rte_mbuf *m);
char *zl_rte_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
uint16_t zl_rte_pktmbuf_nb_segs(const struct rte_mbuf *m);
int zl_rte_errno(void);
uint16_t zl_rx_burst_frames(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **mbufs,
                            const uint8_t **data, uint16_t *lens, uint16_t nb_pkts);
uint16_t zl_tx_burst_copy(uint16_t port_id, uint16_t queue_id, struct rte_mempool *mp,
                          const uint8_t *const *frames, const uint16_t *lens, uint16_t nb_pkts,
                          uint16_t *no_mbuf, uint16_t *ring_full);
