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
/* `rte_lcore_id()` (static inline) of the calling thread, and `LCORE_ID_ANY` (a thread that is
 * no lcore: no per-lcore mempool cache). */
unsigned zl_rte_lcore_id(void);
unsigned zl_lcore_id_any(void);
uint64_t zl_rss_hf_ip_tcp_udp(void);
size_t zl_mbuf_buf_addr_offset(void);
size_t zl_mbuf_data_off_offset(void);
uint16_t zl_tx_burst_mixed(uint16_t port_id, uint16_t queue_id, struct rte_mempool *mp,
                           struct rte_mbuf *const *lent, const uint8_t *const *frames,
                           const uint16_t *lens, uint16_t nb_pkts, uint64_t *bytes,
                           uint16_t *no_mbuf, uint16_t *ring_full);
uint16_t zl_rx_burst_frames(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **mbufs,
                            const uint8_t **data, uint16_t *lens, uint16_t nb_pkts);
uint16_t zl_tx_burst_copy(uint16_t port_id, uint16_t queue_id, struct rte_mempool *mp,
                          const uint8_t *const *frames, const uint16_t *lens, uint16_t nb_pkts,
                          uint16_t *no_mbuf, uint16_t *ring_full);

#include <rte_lpm.h>
#include <rte_lpm6.h>

/* Longest-prefix-match loops for the LPM comparison benchmark: `rte_lpm_lookup` is static
 * inline, so the loop over the addresses is here, compiled as DPDK's own callers compile it.
 * Each returns the sum of the next hops found (0 for a miss) so the work cannot be elided. */
uint64_t zl_lpm_lookup_sum(const struct rte_lpm *lpm, const uint32_t *ips, uint32_t n);
uint64_t zl_lpm6_lookup_sum(const struct rte_lpm6 *lpm, const uint8_t *ips, uint32_t n);
/* IPv4 through `rte_lpm_lookup_bulk` (`batch`, at most 64, addresses per call) and through
 * `rte_lpm_lookupx4` (four at a time, SSE; a miss adds 0), DPDK's two burst lookups. */
uint64_t zl_lpm_lookup_bulk_sum(const struct rte_lpm *lpm, const uint32_t *ips, uint32_t n,
                                uint32_t batch);
uint64_t zl_lpm_lookupx4_sum(const struct rte_lpm *lpm, const uint32_t *ips, uint32_t n);
/* The same through `rte_lpm6_lookup_bulk_func`, `batch` (at most 64) addresses per call, as a
 * poll loop looks up a burst; a miss (-1) adds 0. */
uint64_t zl_lpm6_lookup_bulk_sum(const struct rte_lpm6 *lpm, const uint8_t *ips, uint32_t n,
                                 uint32_t batch);

#include <rte_red.h>

/* One `rte_red_enqueue` decision (static inline in rte_red.h) through the binding: the
 * comparison of ZL-RED's decision with DPDK's own RED (crates/zl-dpdk/benches/red_decision.rs).
 * Returns rte_red_enqueue's 0 (enqueue), 1 (forced drop) or 2 (early drop). */
int zl_rte_red_enqueue(const struct rte_red_config *cfg, struct rte_red *red, unsigned q,
                       uint64_t time);
