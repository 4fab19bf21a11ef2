//! [`BpfInsn`], the eBPF instruction as the kernel reads it: what the program's assembler
//! ([`crate::program`]) writes and what the loader ([`crate::bpf`]) hands to `bpf(2)`.

/// One eBPF instruction (`struct bpf_insn`): opcode, dst/src registers in one byte (dst in
/// the low nibble on little-endian hosts), signed offset, signed immediate.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BpfInsn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

impl BpfInsn {
    pub(crate) const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        BpfInsn {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }
}
