//! Turns on `cfg(dpdk_available)` when zl-dpdk-sys was built with the bindings.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dpdk_available)");
    println!("cargo::rerun-if-env-changed=DEP_ZL_DPDK_AVAILABLE");
    if std::env::var_os("DEP_ZL_DPDK_AVAILABLE").is_some() {
        println!("cargo::rustc-cfg=dpdk_available");
    }
}
