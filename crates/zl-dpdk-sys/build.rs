//! Finds DPDK with pkg-config, compiles the C shim and generates the bindings, when the `dpdk`
//! feature is on. Anything missing (the feature, libdpdk, libclang) leaves an empty shell and
//! a cargo warning, so `--all-features` builds still succeed on machines without DPDK.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dpdk_available)");
    println!("cargo::rerun-if-changed=build.rs");
    #[cfg(feature = "dpdk")]
    with_dpdk::build();
}

#[cfg(feature = "dpdk")]
mod with_dpdk {
    use std::path::PathBuf;

    pub fn build() {
        println!("cargo::rerun-if-changed=shim/zl_dpdk_shim.c");
        println!("cargo::rerun-if-changed=shim/wrapper.h");
        let lib = match pkg_config::Config::new()
            .atleast_version("22.11")
            .cargo_metadata(false)
            .probe("libdpdk")
        {
            Ok(lib) => lib,
            Err(e) => {
                println!(
                    "cargo::warning=zl-dpdk-sys: DPDK >= 22.11 not found by pkg-config ({e}); \
                     building without DPDK (install libdpdk-dev)"
                );
                return;
            }
        };
        let mut clang_args: Vec<String> = lib
            .include_paths
            .iter()
            .map(|p| format!("-I{}", p.display()))
            .collect();
        clang_args.push("-include".into());
        clang_args.push("rte_config.h".into());

        let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
        let bindings = bindgen::Builder::default()
            .header("shim/wrapper.h")
            .clang_args(&clang_args)
            .clang_arg("-march=corei7")
            .allowlist_function("zl_.*")
            .allowlist_function("rte_eal_init")
            .allowlist_function("rte_eal_cleanup")
            .allowlist_function("rte_strerror")
            .allowlist_function("rte_socket_id")
            .allowlist_function("rte_thread_register")
            .allowlist_function("rte_thread_unregister")
            .allowlist_function("rte_dev_probe")
            .allowlist_function("rte_dev_remove")
            .allowlist_function("rte_eth_dev_.*")
            .allowlist_function("rte_eth_rx_queue_setup")
            .allowlist_function("rte_eth_tx_queue_setup")
            .allowlist_function("rte_eth_stats_get")
            .allowlist_function("rte_eth_stats_reset")
            .allowlist_function("rte_eth_promiscuous_enable")
            .allowlist_function("rte_pktmbuf_pool_create")
            .allowlist_function("rte_mempool_free")
            .allowlist_function("rte_mempool_avail_count")
            .allowlist_function("rte_mempool_in_use_count")
            .allowlist_function("rte_lpm_create")
            .allowlist_function("rte_lpm_add")
            .allowlist_function("rte_lpm_free")
            .allowlist_function("rte_lpm6_create")
            .allowlist_function("rte_lpm6_add")
            .allowlist_function("rte_lpm6_free")
            .allowlist_function("rte_red_config_init")
            .allowlist_function("rte_red_rt_data_init")
            .allowlist_type("rte_red_config")
            .allowlist_type("rte_red")
            .allowlist_type("rte_lpm_config")
            .allowlist_type("rte_lpm6_config")
            .allowlist_type("rte_eth_conf")
            .allowlist_type("rte_eth_stats")
            .allowlist_type("rte_eth_dev_info")
            .allowlist_var("RTE_MBUF_DEFAULT_BUF_SIZE")
            .allowlist_var("RTE_PKTMBUF_HEADROOM")
            .allowlist_var("RTE_ETH_NAME_MAX_LEN")
            // The mbuf and mempool layouts are read only through the shim.
            .opaque_type("rte_mbuf")
            .opaque_type("rte_mempool")
            .opaque_type("rte_lpm")
            .opaque_type("rte_lpm6")
            .derive_default(true)
            .layout_tests(false)
            .generate_comments(false)
            .generate()
            .unwrap_or_else(|e| {
                panic!("bindgen on DPDK headers failed: {e} (is libclang-dev installed?)")
            });
        bindings
            .write_to_file(out.join("bindings.rs"))
            .expect("write bindings.rs");

        let mut build = cc::Build::new();
        build.file("shim/zl_dpdk_shim.c").flag("-march=corei7");
        for p in &lib.include_paths {
            build.include(p);
        }
        build.flag("-include").flag("rte_config.h");
        build.warnings(false).compile("zl_dpdk_shim");

        // Link DPDK's shared libraries; drivers (net_null, net_ring, ...) are plugins EAL
        // loads from its default pmds directory at init.
        for dir in &lib.link_paths {
            println!("cargo::rustc-link-search=native={}", dir.display());
        }
        for l in [
            "rte_ethdev",
            "rte_lpm",
            "rte_sched",
            "rte_mbuf",
            "rte_mempool",
            "rte_ring",
            "rte_eal",
            "rte_kvargs",
        ] {
            println!("cargo::rustc-link-lib=dylib={l}");
        }
        println!("cargo::rustc-cfg=dpdk_available");
        println!("cargo::metadata=available=1");
    }
}
