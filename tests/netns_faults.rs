//! Faults with real interfaces (root; `SKIPPED ...` otherwise): an AF_XDP port whose interface
//! is deleted under the running `zlrouter` ends the run with a message naming it (exit 2),
//! the final table printed first; never a silent spin.

mod netns;

use netns::*;

#[test]
fn an_interface_deleted_mid_run_ends_the_run_with_a_clear_message() {
    const TEST: &str = "gone";
    if !is_root() {
        return skip(TEST, "needs root");
    }
    let mut lab = match Lab::new(TEST, &[SenderSpec::PLAIN]) {
        Ok(l) => l,
        Err(e) => return skip(TEST, &format!("cannot build the namespaces: {e}")),
    };
    let qos = "[qos]\nlink_rate_bps = 8_000_000\nshaper = { rate_bps = 8_000_000 }\n\
               [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 100\n";
    let cfg = lab.router_config(qos, "");
    if let Err(e) = lab.start_router(&cfg) {
        return skip(TEST, &format!("the AF_XDP router did not start: {e}"));
    }
    // Traffic first, so the port is busy when its interface goes.
    let back = udp_echo(&lab, 7030, 50).expect("udp echo");
    assert!(back >= 48, "{back} of 50 echoes");
    lab.rtr.ip(&["link", "del", "r0"]).expect("delete r0");
    let (status, out) = lab.router.take().expect("router").wait_exit();
    eprintln!("{status:?}\n{out}");
    assert_eq!(status.code(), Some(2), "{out}");
    assert!(out.contains("stopped: a port failed"), "{out}");
    assert!(out.contains("received "), "final table missing:\n{out}");
    let err = out.split("--- stderr ---").nth(1).unwrap_or("");
    assert!(
        err.contains("r0"),
        "the error does not name the port:\n{err}"
    );
}
