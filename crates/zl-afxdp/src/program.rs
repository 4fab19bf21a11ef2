//! The XDP program that decides, per frame, whether zlrouter or the kernel stack gets it.
//!
//! Only transit unicast IPv4 / IPv6 goes to the AF_XDP sockets; everything the kernel is the
//! control plane for passes to it untouched (`XDP_PASS`). As C, the program reads:
//! ```c
//! int zlr_xdp(struct xdp_md *ctx) {
//!     void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
//!     struct ethhdr *eth = data;
//!     if (eth + 1 > end) return XDP_PASS;                 // runt: the kernel counts it
//!     if (eth->h_dest[0] & 1) return XDP_PASS;           // broadcast / multicast MAC
//!     if (eth->h_proto == htons(ETH_P_IP)) {
//!         struct iphdr *ip = (void *)(eth + 1);
//!         if (ip + 1 > end || ip->version != 4) return XDP_PASS;
//!         if ((ip->daddr & 0xf0) == 0xe0) return XDP_PASS;   // 224.0.0.0/4
//!         if (bpf_map_lookup_elem(&local4, &ip->daddr)) return XDP_PASS;
//!     } else if (eth->h_proto == htons(ETH_P_IPV6)) {
//!         struct ipv6hdr *ip6 = (void *)(eth + 1);
//!         if (ip6 + 1 > end || ip6->version != 6) return XDP_PASS;
//!         if (ip6->daddr.s6_addr[0] == 0xff) return XDP_PASS;                 // ff00::/8
//!         if (ip6->daddr.s6_addr[0] == 0xfe
//!             && (ip6->daddr.s6_addr[1] & 0xc0) == 0x80) return XDP_PASS;     // fe80::/10
//!         if (ip6->nexthdr == IPPROTO_ICMPV6) {
//!             struct icmp6hdr *icmp = (void *)(ip6 + 1);
//!             if (icmp + 1 > end) return XDP_PASS;     // (the type byte, checked alone)
//!             if (icmp->icmp6_type >= 133 && icmp->icmp6_type <= 137) return XDP_PASS;
//!         }
//!         if (bpf_map_lookup_elem(&local6, &ip6->daddr)) return XDP_PASS;
//!     } else {
//!         return XDP_PASS;                                 // ARP, LLDP, VLAN, ...
//!     }
//!     return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//! }
//! ```
//! and [`classify_program`] writes it out instruction by instruction, one comment each, with
//! the tiny assembler below (labels resolved at the end). Why every branch:
//! - **runt / truncated headers / wrong version**: not ours to judge; the kernel drops and
//!   counts them (`ip -s link`), as it would without zlrouter.
//! - **group-addressed destination MAC** (bit 0 of the first byte): broadcast (ARP requests,
//!   DHCP) and multicast (NDP's solicited-node groups, OSPF, VRRP, mDNS); a router does not
//!   forward these.
//! - **non-IP EtherTypes**: ARP, LLDP, 802.1Q-tagged frames belong to the kernel.
//! - **IPv4 224.0.0.0/4, IPv6 ff00::/8**: multicast in a unicast frame is still not transit.
//! - **IPv6 fe80::/10**: link-local is never forwarded (RFC 4291 2.5.6).
//! - **ICMPv6 133-137** (RS, RA, NS, NA, Redirect): NDP is the kernel's, also when sent to a
//!   unicast address (NUD probes are unicast NS).
//! - **the router's own addresses** (`local4` / `local6`, kept in sync from netlink
//!   RTM_NEWADDR / RTM_DELADDR by the control plane, see [`crate::LocalAddrs`]): ping, SSH,
//!   BGP, OSPF and every other packet to the machine itself go to its stack. IPv4 subnet
//!   broadcasts are in `local4` too (the address's IFA_BROADCAST).
//! - **the rest** is transit unicast: redirected to the socket of its RX queue; a queue
//!   with no socket falls back to `no_socket` (XDP_PASS in service).
//!
//! decided: a map of local addresses rather than the kernel's `bpf_fib_lookup`. The FIB
//! lookup would also name local destinations (`BPF_FIB_LKUP_RET_NOT_FWDED`), but it answers
//! `FWD_DISABLED` unless the kernel's own forwarding is on, needs the full FIB walk per
//! packet in the program, and the next hop and MAC it gives would duplicate what the data
//! plane takes from the kernel through netlink anyway. The two hash lookups here touch one
//! bucket each.
//!
//! decided: the destination MAC is not compared with the interface's: on a promiscuous
//! interface frames for other hosts would be redirected too; the kernel marks and drops
//! those (PACKET_OTHERHOST), and zlrouter only forwards frames for the port's MAC when its
//! config sets one. Keeping the program free of per-interface constants lets one program
//! serve every port.

use std::collections::HashMap;
use std::os::fd::RawFd;

use crate::insn::BpfInsn;

/// `enum xdp_action` values.
pub const XDP_ABORTED: i32 = 0;
pub const XDP_DROP: i32 = 1;
pub const XDP_PASS: i32 = 2;
pub const XDP_REDIRECT: i32 = 4;

const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;

// Opcodes, built as class | size-or-op | mode-or-source.
const BPF_LD: u8 = 0x00;
const BPF_LDX: u8 = 0x01;
const BPF_STX: u8 = 0x03;
const BPF_JMP: u8 = 0x05;
const BPF_ALU64: u8 = 0x07;
const BPF_W: u8 = 0x00;
const BPF_H: u8 = 0x08;
const BPF_B: u8 = 0x10;
const BPF_DW: u8 = 0x18;
const BPF_IMM: u8 = 0x00;
const BPF_MEM: u8 = 0x60;
const BPF_K: u8 = 0x00;
const BPF_X: u8 = 0x08;
const BPF_ADD: u8 = 0x00;
const BPF_AND: u8 = 0x50;
const BPF_MOV: u8 = 0xb0;
const BPF_JA: u8 = 0x00;
const BPF_JEQ: u8 = 0x10;
const BPF_JGT: u8 = 0x20;
const BPF_JNE: u8 = 0x50;
const BPF_JLT: u8 = 0xa0;
const BPF_JLE: u8 = 0xb0;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;

/// Registers by their ABI role: r0 return value, r1-r5 arguments (clobbered by calls), r6-r9
/// callee-saved, r10 the read-only frame pointer.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R5: u8 = 5;
const R6: u8 = 6;
const R10: u8 = 10;

/// A straight-line eBPF assembler with forward labels, enough for [`classify_program`].
struct Asm {
    insns: Vec<BpfInsn>,
    labels: HashMap<&'static str, usize>,
    /// (index of a jump, label it targets), patched in [`Asm::finish`].
    fixups: Vec<(usize, &'static str)>,
}

impl Asm {
    fn new() -> Self {
        Asm {
            insns: Vec::with_capacity(64),
            labels: HashMap::new(),
            fixups: Vec::new(),
        }
    }

    fn emit(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(BpfInsn::new(code, dst, src, off, imm));
    }

    fn label(&mut self, name: &'static str) {
        let prev = self.labels.insert(name, self.insns.len());
        assert!(prev.is_none(), "label {name} defined twice");
    }

    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, target: &'static str) {
        self.fixups.push((self.insns.len(), target));
        self.emit(BPF_JMP | code, dst, src, 0, imm);
    }

    /// `dst = *(size *)(src + off)`
    fn ldx(&mut self, size: u8, dst: u8, src: u8, off: i16) {
        self.emit(BPF_LDX | BPF_MEM | size, dst, src, off, 0);
    }
    /// `*(size *)(dst + off) = src`
    fn stx(&mut self, size: u8, dst: u8, off: i16, src: u8) {
        self.emit(BPF_STX | BPF_MEM | size, dst, src, off, 0);
    }
    fn mov_reg(&mut self, dst: u8, src: u8) {
        self.emit(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0);
    }
    fn mov_imm(&mut self, dst: u8, imm: i32) {
        self.emit(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm);
    }
    fn add_imm(&mut self, dst: u8, imm: i32) {
        self.emit(BPF_ALU64 | BPF_ADD | BPF_K, dst, 0, 0, imm);
    }
    fn and_imm(&mut self, dst: u8, imm: i32) {
        self.emit(BPF_ALU64 | BPF_AND | BPF_K, dst, 0, 0, imm);
    }
    /// `dst = map` as a two-slot 64-bit immediate load the verifier resolves from the fd.
    fn ld_map(&mut self, dst: u8, map_fd: RawFd) {
        self.emit(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, map_fd);
        self.emit(0, 0, 0, 0, 0);
    }
    fn call(&mut self, helper: i32) {
        self.emit(BPF_JMP | BPF_CALL, 0, 0, 0, helper);
    }
    fn exit(&mut self) {
        self.emit(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    }

    fn finish(mut self) -> Vec<BpfInsn> {
        for (at, target) in self.fixups {
            let to = *self
                .labels
                .get(target)
                .unwrap_or_else(|| panic!("label {target} never defined"));
            // Jump offsets count from the instruction after the jump.
            self.insns[at].off = (to as i64 - at as i64 - 1) as i16;
        }
        self.insns
    }
}

/// The map fds the program refers to.
#[derive(Clone, Copy, Debug)]
pub struct ProgramMaps {
    /// XSKMAP keyed by RX queue index.
    pub xsks: RawFd,
    /// Hash map of the router's IPv4 addresses (4-byte key in network order).
    pub local4: RawFd,
    /// Hash map of the router's IPv6 addresses (16-byte key).
    pub local6: RawFd,
}

/// EtherTypes as the little-endian u16 load of their network-order bytes reads them.
const ETH_P_IP_LE: i32 = 0x0008;
const ETH_P_IPV6_LE: i32 = 0xdd86;
const ETH_HLEN: i32 = 14;
const IPPROTO_ICMPV6: i32 = 58;

/// The classifying program of the module doc. `no_socket` is the action of a transit frame
/// whose RX queue has no socket: XDP_PASS in service; the tests pass XDP_DROP to tell "would
/// redirect" from "passed".
pub fn classify_program(maps: ProgramMaps, no_socket: i32) -> Vec<BpfInsn> {
    let mut a = Asm::new();
    a.mov_reg(R6, R1); // r6 = ctx: calls clobber r1-r5
    a.ldx(BPF_W, R2, R6, 0); // r2 = ctx->data
    a.ldx(BPF_W, R3, R6, 4); // r3 = ctx->data_end
    a.mov_reg(R4, R2); // r4 = data
    a.add_imm(R4, ETH_HLEN); // r4 = data + sizeof(struct ethhdr)
    a.jump(BPF_JGT | BPF_X, R4, R3, 0, "pass"); // runt frame: the kernel's
    a.ldx(BPF_B, R5, R2, 0); // r5 = first byte of the destination MAC
    a.and_imm(R5, 1); // r5 = its group bit
    a.jump(BPF_JNE | BPF_K, R5, 0, 0, "pass"); // broadcast / multicast: the kernel's
    a.ldx(BPF_H, R5, R2, 12); // r5 = EtherType (network order, read little-endian)
    a.jump(BPF_JEQ | BPF_K, R5, 0, ETH_P_IP_LE, "ipv4"); // IPv4
    a.jump(BPF_JEQ | BPF_K, R5, 0, ETH_P_IPV6_LE, "ipv6"); // IPv6
    a.jump(BPF_JA, 0, 0, 0, "pass"); // ARP, LLDP, VLAN, anything else: the kernel's

    a.label("ipv4");
    a.mov_reg(R4, R2); // r4 = data
    a.add_imm(R4, ETH_HLEN + 20); // r4 = end of a minimal IPv4 header
    a.jump(BPF_JGT | BPF_X, R4, R3, 0, "pass"); // truncated header: the kernel's
    a.ldx(BPF_B, R5, R2, ETH_HLEN as i16); // r5 = version / IHL byte
    a.and_imm(R5, 0xf0); // r5 = version << 4
    a.jump(BPF_JNE | BPF_K, R5, 0, 0x40, "pass"); // not version 4: the kernel's
    a.ldx(BPF_B, R5, R2, (ETH_HLEN + 16) as i16); // r5 = first byte of the destination
    a.and_imm(R5, 0xf0); // r5 = its top four bits
    a.jump(BPF_JEQ | BPF_K, R5, 0, 0xe0, "pass"); // 224.0.0.0/4 multicast: the kernel's
    a.ldx(BPF_W, R5, R2, (ETH_HLEN + 16) as i16); // r5 = destination address
    a.stx(BPF_W, R10, -4, R5); // key on the stack at fp - 4
    a.ld_map(R1, maps.local4); // r1 = &local4
    a.mov_reg(R2, R10); // r2 = fp
    a.add_imm(R2, -4); // r2 = &key
    a.call(BPF_FUNC_MAP_LOOKUP_ELEM); // r0 = local4[key] or NULL
    a.jump(BPF_JNE | BPF_K, R0, 0, 0, "pass"); // the router's own address: the kernel's
    a.jump(BPF_JA, 0, 0, 0, "redirect"); // transit unicast IPv4

    a.label("ipv6");
    a.mov_reg(R4, R2); // r4 = data
    a.add_imm(R4, ETH_HLEN + 40); // r4 = end of the fixed IPv6 header
    a.jump(BPF_JGT | BPF_X, R4, R3, 0, "pass"); // truncated header: the kernel's
    a.ldx(BPF_B, R5, R2, ETH_HLEN as i16); // r5 = version / traffic-class byte
    a.and_imm(R5, 0xf0); // r5 = version << 4
    a.jump(BPF_JNE | BPF_K, R5, 0, 0x60, "pass"); // not version 6: the kernel's
    a.ldx(BPF_B, R5, R2, (ETH_HLEN + 24) as i16); // r5 = first byte of the destination
    a.jump(BPF_JEQ | BPF_K, R5, 0, 0xff, "pass"); // ff00::/8 multicast: the kernel's
    a.jump(BPF_JNE | BPF_K, R5, 0, 0xfe, "v6_ndp"); // not fe..: cannot be link-local
    a.ldx(BPF_B, R5, R2, (ETH_HLEN + 25) as i16); // r5 = second byte of the destination
    a.and_imm(R5, 0xc0); // r5 = its top two bits
    a.jump(BPF_JEQ | BPF_K, R5, 0, 0x80, "pass"); // fe80::/10 link-local: the kernel's
    a.label("v6_ndp");
    a.ldx(BPF_B, R5, R2, (ETH_HLEN + 6) as i16); // r5 = next header
    a.jump(BPF_JNE | BPF_K, R5, 0, IPPROTO_ICMPV6, "v6_local"); // not ICMPv6: not NDP
    a.mov_reg(R4, R2); // r4 = data
    a.add_imm(R4, ETH_HLEN + 41); // r4 = end of the ICMPv6 type byte
    a.jump(BPF_JGT | BPF_X, R4, R3, 0, "pass"); // truncated ICMPv6: the kernel's
    a.ldx(BPF_B, R5, R2, (ETH_HLEN + 40) as i16); // r5 = ICMPv6 type
    a.jump(BPF_JLT | BPF_K, R5, 0, 133, "v6_local"); // below Router Solicitation: not NDP
    a.jump(BPF_JLE | BPF_K, R5, 0, 137, "pass"); // RS, RA, NS, NA, Redirect: the kernel's
    a.label("v6_local");
    a.ldx(BPF_DW, R5, R2, (ETH_HLEN + 24) as i16); // r5 = destination bytes 0-7
    a.stx(BPF_DW, R10, -16, R5); // key bytes 0-7 at fp - 16
    a.ldx(BPF_DW, R5, R2, (ETH_HLEN + 32) as i16); // r5 = destination bytes 8-15
    a.stx(BPF_DW, R10, -8, R5); // key bytes 8-15 at fp - 8
    a.ld_map(R1, maps.local6); // r1 = &local6
    a.mov_reg(R2, R10); // r2 = fp
    a.add_imm(R2, -16); // r2 = &key
    a.call(BPF_FUNC_MAP_LOOKUP_ELEM); // r0 = local6[key] or NULL
    a.jump(BPF_JNE | BPF_K, R0, 0, 0, "pass"); // the router's own address: the kernel's
                                               // Falls through: transit unicast IPv6.

    a.label("redirect");
    a.ldx(BPF_W, R2, R6, 16); // r2 = ctx->rx_queue_index
    a.ld_map(R1, maps.xsks); // r1 = &xsks
    a.mov_imm(R3, no_socket); // r3 = action when the queue has no socket
    a.call(BPF_FUNC_REDIRECT_MAP); // r0 = bpf_redirect_map(r1, r2, r3)
    a.exit(); // return r0

    a.label("pass");
    a.mov_imm(R0, XDP_PASS); // r0 = XDP_PASS
    a.exit(); // return XDP_PASS: the kernel stack takes the frame
    a.finish()
}

/// The program that redirects every frame (`redirect = "all"`): the lab's raw-frame tests
/// and the benchmarks, which have no kernel control plane behind the port.
///
/// ```c
/// int zlr_xdp_all(struct xdp_md *ctx) {
///     return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
/// }
/// ```
pub fn redirect_all_program(xsks: RawFd) -> Vec<BpfInsn> {
    let mut a = Asm::new();
    a.ldx(BPF_W, R2, R1, 16); // r2 = ctx->rx_queue_index
    a.ld_map(R1, xsks); // r1 = &xsks
    a.mov_imm(R3, XDP_PASS); // r3 = XDP_PASS: the action when the queue has no socket
    a.call(BPF_FUNC_REDIRECT_MAP); // r0 = bpf_redirect_map(r1, r2, r3)
    a.exit(); // return r0
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(insn: &BpfInsn) -> [u8; 8] {
        let mut got = [0u8; 8];
        got[0] = insn.code;
        got[1] = insn.regs;
        got[2..4].copy_from_slice(&insn.off.to_le_bytes());
        got[4..8].copy_from_slice(&insn.imm.to_le_bytes());
        got
    }

    #[test]
    fn redirect_all_matches_clangs_encoding() {
        // The C program of `redirect_all_program`'s doc compiled by clang 14 (-O2 -target
        // bpf, shown by llvm-objdump -d), with its ld_imm64 relocated as libbpf would: src_reg
        // 1 (BPF_PSEUDO_MAP_FD) and the map fd, here 7, in the immediate.
        let expected: [[u8; 8]; 6] = [
            [0x61, 0x12, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00],
            [0x18, 0x11, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00],
            [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
            [0xb7, 0x03, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00],
            [0x85, 0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x00],
            [0x95, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
        ];
        let prog = redirect_all_program(7);
        assert_eq!(prog.len(), expected.len());
        for (insn, want) in prog.iter().zip(expected) {
            assert_eq!(bytes(insn), want);
        }
    }

    #[test]
    fn classify_jumps_land_inside_the_program_and_it_ends_in_exit() {
        let prog = classify_program(
            ProgramMaps {
                xsks: 3,
                local4: 4,
                local6: 5,
            },
            XDP_PASS,
        );
        for (i, insn) in prog.iter().enumerate() {
            let class = insn.code & 0x07;
            let op = insn.code & 0xf0;
            if class == BPF_JMP && op != BPF_CALL && op != BPF_EXIT {
                let to = i as i64 + 1 + insn.off as i64;
                assert!(to > i as i64 && (to as usize) < prog.len(), "insn {i}");
            }
        }
        assert_eq!(prog.last().unwrap().code, BPF_JMP | BPF_EXIT);
        // The three maps are referenced by fd, each through a pseudo-map-fd load.
        let maps: Vec<i32> = prog
            .iter()
            .filter(|i| i.code == BPF_LD | BPF_DW | BPF_IMM && i.regs >> 4 == BPF_PSEUDO_MAP_FD)
            .map(|i| i.imm)
            .collect();
        assert_eq!(maps, vec![4, 5, 3]);
    }
}
