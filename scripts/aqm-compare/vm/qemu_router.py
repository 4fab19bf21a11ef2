"""The kernel reference router in a VM: a stock Debian kernel under qemu-system forwards
between the comparison's namespaces, with htb and the qdisc under test on every egress.

The running kernel may lack fq_codel, cake, pie or netem; the VM's kernel has them (see
build-image). QemuRouter has KernelRouter's interface in aqm-compare, so the harness can run
the same scenarios through it:

    import sys; sys.path.insert(0, os.path.join(HERE, "vm"))
    from qemu_router import QemuRouter, vm_qdiscs
    topo = {"ns_rtr": NS_RTR, "clients": CLIENTS, "srv_ip": SRV_IP, "srv_mac": SRV_MAC,
            "rs_mac": RS_MAC}
    router = QemuRouter(lab, "fq_codel", rate, delays, buffer_packets,
                        cache_dir="/var/tmp/zlaqmc-vm", topo=topo, workdir=work)
    ...
    router.stop()          # router.final_qdisc_stats: the VM's `tc -s qdisc` at the end

How it joins the lab: the router namespace keeps its veth ends (ra, rb, rs); each is enslaved
to a Linux bridge together with a tap (ta, tb, ts) that qemu opens as one virtio-net NIC. The
VM's NICs carry the router MACs the hosts have as static neighbours, so while the VM runs the
veth ends carry other MACs (restored by stop()). The propagation delays (`delays`, by the
router-side interface, as KernelRouter takes them) are applied inside the VM, with netem on
what arrives from that client, since the host's kernel may have no netem: the same place in
the path as netem on the client's eth0.

Standard library only; needs root, qemu-system-x86_64 and the image build-image makes (built
on first use when missing). With hardware virtualization (/dev/kvm and vmx or svm among the
CPU's flags) the VM runs under KVM; without it under TCG, qemu's emulator, which boots in tens
of seconds and costs host CPU per packet. A /dev/kvm without vmx/svm is a paravirtual KVM
(such as PVM on a machine that is itself a VM): it runs only guest kernels built for it, and a
stock kernel hangs right after the boot loader, so it counts as no KVM.
"""

import collections
import json
import os
import signal
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CACHE = "/var/tmp/zlaqmc-vm"
QEMU = "qemu-system-x86_64"

# No offloads between the VM and its taps: every frame a complete MTU-sized packet, so the
# VM's qdiscs see packets as the hosts sent them (the harness turns the veths' offloads off).
NIC_OPTS = ("csum=off,guest_csum=off,gso=off,guest_tso4=off,guest_tso6=off,guest_ecn=off,"
            "guest_ufo=off,host_tso4=off,host_tso6=off,host_ecn=off,host_ufo=off")


def _run(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")
    return r


def ensure_image(cache_dir=DEFAULT_CACHE):
    """The manifest of the VM image in cache_dir, running build-image first when needed."""
    manifest = os.path.join(cache_dir, "manifest.json")
    if not (os.path.exists(manifest) and os.path.exists(os.path.join(cache_dir, "initrd.img"))
            and os.path.exists(os.path.join(cache_dir, "vmlinuz"))):
        _run([os.path.join(HERE, "build-image"), cache_dir])
    with open(manifest) as f:
        return json.load(f)


def vm_qdiscs(cache_dir=DEFAULT_CACHE):
    """Which qdiscs (fq_codel, cake, pie, dualpi2, netem, htb, ...) the VM's kernel has, as
    aqm-compare's kernel_qdiscs() says for the running kernel."""
    return dict(ensure_image(cache_dir)["qdiscs"])


def choose_accel():
    """("kvm" or "tcg", why): KVM where the CPU has hardware virtualization, else TCG."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg", "no usable /dev/kvm"
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if not flags & {"vmx", "svm"}:
        return "tcg", ("/dev/kvm without vmx/svm (a paravirtual KVM such as PVM: stock kernels "
                       "do not boot under it)")
    return "kvm", "hardware virtualization"


def problems():
    """What keeps the VM from running here (empty when nothing does)."""
    p = []
    if not os.path.exists("/dev/net/tun"):
        p.append("no /dev/net/tun")
    if _run(["sh", "-c", f"command -v {QEMU}"], check=False).returncode != 0:
        p.append(f"no {QEMU} (Debian: apt-get install --no-install-recommends qemu-system-x86)")
    return p


def _fmt_ms(d):
    return f"{float(d):g}"


class QemuRouter:
    """KernelRouter's interface (stats, flows, stop) with a VM doing the forwarding.

    topo: {"ns_rtr", "clients" (namespace: (address, router-side interface, host MAC,
    router MAC)), "srv_ip", "srv_mac", "rs_mac", optionally "srv_if" (default "rs")}: the
    harness's constants, passed in so this module does not import the harness.
    """

    def __init__(self, lab, qdisc, rate, delays, buffer_packets, *, cache_dir=DEFAULT_CACHE,
                 topo, workdir=None, accel="auto", ready_timeout=None, mem_mb=512, vcpus=1,
                 qargs=None):
        self.lab, self.qdisc = lab, qdisc
        self.ns = topo["ns_rtr"]
        self.proc = None
        self.final_qdisc_stats = None
        self._made = []        # interfaces made in the router namespace, deleted on stop
        self._macs = {}        # veth end -> its MAC before the VM took it
        self._lines = collections.deque(maxlen=400)
        self._cond = threading.Condition()
        self._ready = self._fatal = None
        self._stats_block, self._stats_done = None, []
        self._reader = None
        self._stopped = False
        self.vm_nics = {}      # router MAC -> the VM's name for that NIC (eth0, ...)

        if accel == "auto":
            accel, _why = choose_accel()
        self.accel = accel
        if ready_timeout is None:
            # TCG emulates the boot: tens of seconds, more on a loaded machine.
            ready_timeout = 60.0 if accel == "kvm" else 180.0
        bad = problems()
        if bad:
            raise RuntimeError("QemuRouter: " + "; ".join(bad))
        manifest = ensure_image(cache_dir)
        if qdisc != "pfifo" and not manifest["qdiscs"].get(qdisc):
            raise RuntimeError(f"the VM's kernel {manifest['release']} has no `{qdisc}`")

        # One link per router-side interface: (veth end, router address, neighbour IP,
        # neighbour MAC, router MAC, delay in ms).
        links = []
        for _ns, (addr, rif, mac, rmac) in topo["clients"].items():
            links.append((rif, addr.rsplit(".", 1)[0] + ".1/24", addr, mac, rmac,
                          float(delays.get(rif, 0.0))))
        srv_if = topo.get("srv_if", "rs")
        links.append((srv_if, topo["srv_ip"].rsplit(".", 1)[0] + ".1/24", topo["srv_ip"],
                      topo["srv_mac"], topo["rs_mac"], float(delays.get(srv_if, 0.0))))
        self.links = links

        self.workdir = workdir or os.path.join(cache_dir, "run")
        os.makedirs(self.workdir, exist_ok=True)
        self.console_path = os.path.join(self.workdir, "vm-console.log")
        try:
            self._plumb()
            self._boot(manifest, rate, buffer_packets, ready_timeout, mem_mb, vcpus, qargs)
        except BaseException:
            self._teardown()
            raise

    # ----------------------------------------------------------------------------------------
    # The links: veth end + tap in one bridge, in the router namespace

    def _nsx(self, *cmd, check=True):
        return _run(["ip", "netns", "exec", self.ns, *cmd], check=check)

    @staticmethod
    def _names(rif):
        # ra -> tap ta, bridge bra (interface names stay short and unique per link).
        suffix = rif[1:] if rif.startswith("r") and len(rif) > 1 else rif
        return f"t{suffix}", f"br{suffix}"

    def _plumb(self):
        for rif, _addr, _nip, _nmac, rmac, _d in self.links:
            tap, br = self._names(rif)
            # Leftovers of a run that was killed: the names must be free.
            self._nsx("ip", "link", "del", tap, check=False)
            self._nsx("ip", "link", "del", br, check=False)
            self._macs[rif] = self._nsx("cat", f"/sys/class/net/{rif}/address").stdout.strip()
            # The VM's NIC takes the router MAC; the veth end parks on a locally administered
            # MAC that no host uses (first octet 06 instead of 02).
            self._nsx("ip", "link", "set", rif, "address", "06" + rmac[2:])
            self._nsx("ip", "addr", "flush", "dev", rif, check=False)
            self._nsx("ip", "link", "add", br, "type", "bridge", "stp_state", "0",
                      "forward_delay", "0")
            self._made.append(br)
            self._nsx("ip", "link", "set", br, "address", "0a" + rmac[2:])
            self._nsx("ip", "tuntap", "add", "dev", tap, "mode", "tap")
            self._made.append(tap)
            for dev in (br, tap):
                self._nsx("sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", check=False)
            self._nsx("ip", "link", "set", tap, "master", br)
            self._nsx("ip", "link", "set", rif, "master", br)
            self._nsx("ip", "link", "set", tap, "up")
            self._nsx("ip", "link", "set", br, "up")
            self._nsx("ip", "link", "set", rif, "up")

    # ----------------------------------------------------------------------------------------
    # The VM

    def _boot(self, manifest, rate, buffer_packets, timeout, mem_mb, vcpus, qargs):
        append = ["console=ttyS0", "quiet", "panic=-1", "ipv6.disable=1",
                  f"zlq.qdisc={self.qdisc}", f"zlq.rate={int(rate)}",
                  f"zlq.buffer={int(buffer_packets)}"]
        if qargs:
            append.append("zlq.qargs=" + ",".join(qargs))
        # qemu's default CPU model: "-cpu host" can fail where KVM is itself nested (qemu
        # aborts setting MSR 0x10a), and forwarding needs no particular CPU feature.
        cmd = [QEMU, "-name", "zlq-router", "-machine", f"pc,accel={self.accel}",
               "-smp", str(vcpus), "-m", str(mem_mb), "-nodefaults", "-no-user-config",
               "-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot",
               "-kernel", manifest["vmlinuz"], "-initrd", manifest["initrd"]]
        for i, (rif, addr, nip, nmac, rmac, delay) in enumerate(self.links):
            tap, _br = self._names(rif)
            append.append(f"zlq.nic={rmac},{addr},{nip},{nmac},{_fmt_ms(delay)}")
            cmd += ["-netdev", f"tap,id=n{i},ifname={tap},script=no,downscript=no",
                    "-device", f"virtio-net-pci,netdev=n{i},mac={rmac},{NIC_OPTS}"]
        cmd += ["-append", " ".join(append)]
        self._console = open(self.console_path, "w")
        self._console.write("# " + " ".join(cmd) + "\n")
        self._console.flush()
        kw = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if self.lab is not None and hasattr(self.lab, "spawn"):
            # The lab signals it on Ctrl-C with its other processes.
            self.proc = self.lab.spawn(self.ns, cmd, **kw)
        else:
            self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, *cmd], **kw)
        self._reader = threading.Thread(target=self._read_console, daemon=True)
        self._reader.start()
        deadline = time.time() + timeout
        with self._cond:
            while self._ready is None and self._fatal is None and self.proc.poll() is None:
                left = deadline - time.time()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
            ready, fatal = self._ready, self._fatal
        if ready is None:
            why = (fatal or (f"qemu exited with status {self.proc.poll()}"
                             if self.proc.poll() is not None
                             else f"no 'zlq: ready' within {timeout:g} s"))
            raise RuntimeError(f"router VM: {why}; console ({self.console_path}):\n"
                               + self.console_tail())

    def _read_console(self):
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            self._console.write(line + "\n")
            self._console.flush()
            with self._cond:
                self._lines.append(line)
                if line.startswith("zlq: ready"):
                    self._ready = line
                elif line.startswith("zlq: nic "):
                    parts = line.split()
                    self.vm_nics[parts[3]] = parts[2]
                elif line.startswith("zlq: fatal"):
                    self._fatal = line
                elif line.startswith("zlq: stats begin"):
                    self._stats_block = []
                elif line.startswith("zlq: stats end"):
                    self._stats_done.append("\n".join(self._stats_block or []))
                    self._stats_block = None
                elif self._stats_block is not None:
                    self._stats_block.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def vm_dev(self, rif):
        """The VM's NIC (eth0, ...) behind the router-side interface rif (ra, rb, rs)."""
        for link in self.links:
            if link[0] == rif:
                return self.vm_nics.get(link[4])
        return None

    def console_tail(self, n=40):
        with self._cond:
            return "\n".join(list(self._lines)[-n:])

    def _command(self, cmd):
        try:
            self.proc.stdin.write(cmd.encode() + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, ValueError, OSError):
            return False

    def qdisc_stats(self, timeout=10.0):
        """The VM's `tc -s qdisc` (and each NIC's htb classes) now, as text; None when the VM
        does not answer."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        with self._cond:
            before = len(self._stats_done)
        if not self._command("stats"):
            return None
        deadline = time.time() + timeout
        with self._cond:
            while len(self._stats_done) == before and time.time() < deadline:
                self._cond.wait(0.2)
            return self._stats_done[-1] if len(self._stats_done) > before else None

    # ----------------------------------------------------------------------------------------
    # KernelRouter's interface

    def stats(self):
        return None

    def flows(self):
        return []

    def stop(self):
        """Powers the VM off (its last `tc -s qdisc` lands in final_qdisc_stats and
        vm-qdisc-final.txt in the work dir) and gives the veth ends back their MACs."""
        if self._stopped:
            return None
        self._stopped = True
        if self.proc is not None and self.proc.poll() is None:
            with self._cond:
                before = len(self._stats_done)
            if self._command("poweroff"):
                try:
                    self.proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    pass
            with self._cond:
                if len(self._stats_done) > before:
                    self.final_qdisc_stats = self._stats_done[-1]
        if self.final_qdisc_stats is not None:
            with open(os.path.join(self.workdir, "vm-qdisc-final.txt"), "w") as f:
                f.write(self.final_qdisc_stats + "\n")
        self._teardown()
        return None

    def _teardown(self):
        if self.proc is not None and self.proc.poll() is None:
            # Only the qemu this router started, by its PID (ip netns exec execs qemu).
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)
        if getattr(self, "_console", None) is not None:
            self._console.close()
            self._console = None
        for name in reversed(self._made):
            self._nsx("ip", "link", "del", name, check=False)
        self._made.clear()
        for rif, mac in self._macs.items():
            self._nsx("ip", "link", "set", rif, "address", mac, check=False)
            self._nsx("ip", "link", "set", rif, "up", check=False)
        self._macs.clear()
