#!/usr/bin/python3
"""Boot a Debian kernel in a QEMU guest and run a command there.

    guest.py [--kernel PKG]  (N in PKG: the newest number) [--systemd] [--mem MiB] [--smp N] -- COMMAND...

The guest is what a Debian host looks like to sbx, minus the disk image:
Debian's generic kernel package (from apt, unpacked into a cache, never
installed), a busybox initramfs that mounts this machine's /usr and /etc
read-only over 9p (virtio-9p on `-M microvm`, software emulation: KVM here
cannot boot a stock kernel), a tmpfs root, an ext4 scratch disk for /tmp
and /var (idmapped mounts and overlay's upper layers want a real disk
filesystem on old kernels), the checkout at its own path, and the cgroup
layout of a systemd host: only cgroup2, mounted with nsdelegate and
memory_recursiveprot, controllers enabled down to
/system.slice/sbx-test.service, a delegated service the command runs in.
With --systemd, the guest boots Debian's own systemd as PID 1 instead and
runs COMMAND as a delegated service unit (tests/kernel/units).

COMMAND runs as root in the guest with the checkout as its working
directory; its output is this program's output, its exit status this
program's. Nothing is left on the host but the kernel cache.
"""
import argparse
import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.environ.get("SBX_KERNEL_CACHE", "/var/cache/sbx-test-kernels")
BUSYBOX = "/bin/busybox"
DEFAULT_KERNEL = "linux-image-6.1.0-N-amd64"

# What the initramfs loads to reach the 9p shares and the scratch disk
# (with their dependencies, from modules.dep; the rest of the tree is
# loaded on demand through the kernel's modprobe helper).
STAGE1_MODULES = ["virtio_pci", "9pnet_virtio", "9p", "virtio_blk", "crc32c_generic", "ext4"]


def log(msg):
    print("guest: " + msg, file=sys.stderr, flush=True)


def apt_options(suite):
    """apt-get/apt-cache options for a Debian suite this machine's sources
    do not list (bullseye's 5.10, below sbx's floor): a private list of
    sources and package lists under CACHE, signed by debian-archive-keyring
    like the machine's own. [] for the machine's own sources."""
    if not suite:
        return []
    d = os.path.join(CACHE, "apt-" + suite)
    os.makedirs(os.path.join(d, "lists", "partial"), exist_ok=True)
    os.makedirs(os.path.join(d, "archives", "partial"), exist_ok=True)
    sources = os.path.join(d, "sources.list")
    with open(sources, "w") as f:
        f.write("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                "http://deb.debian.org/debian %s main\n" % suite)
    opts = ["-o", "Dir::Etc::SourceList=" + sources, "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", "Dir::State::Lists=" + os.path.join(d, "lists"),
            "-o", "Dir::Cache=" + d, "-o", "APT::Sandbox::User=root"]
    if not os.path.exists(os.path.join(d, ".updated")):
        subprocess.run(["apt-get", "-q", "update"] + opts, check=True, stdout=subprocess.DEVNULL)
        open(os.path.join(d, ".updated"), "w").close()
    return opts


def resolve_package(pattern, suite=None):
    """The newest package named like pattern, where N stands for a number
    (linux-image-6.1.0-N-amd64: the newest ABI of Debian 12's 6.1)."""
    if "N" not in pattern:
        return pattern
    prefix = pattern.split("N")[0]
    rx = re.compile("^" + r"\d+".join(re.escape(p) for p in pattern.split("N")) + "$")
    out = subprocess.run(["apt-cache"] + apt_options(suite) + ["pkgnames", prefix],
                         capture_output=True, text=True, check=True).stdout.split()
    names = [n for n in out if rx.match(n)]
    if not names:
        raise SystemExit("guest: no package is named like %s (apt-get update?)" % pattern)
    return max(names, key=lambda n: [int(x) for x in re.findall(r"\d+", n)])


def prepare_kernel(package, suite=None):
    """Unpack package into CACHE/package once: vmlinuz and a module tree
    with modules.dep. Returns (dir, release)."""
    d = os.path.join(CACHE, package)
    done = os.path.join(d, ".ready")
    if not os.path.exists(done):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        dl = tempfile.mkdtemp(prefix="sbx-kernel-dl-")
        try:
            os.chmod(dl, 0o755)
            shutil.chown(dl, "_apt")
            log("downloading %s" % package)
            subprocess.run(["apt-get"] + apt_options(suite) + ["download", "-q", package],
                           cwd=dl, check=True, stdout=subprocess.DEVNULL)
            deb = glob.glob(os.path.join(dl, "*.deb"))[0]
            subprocess.run(["dpkg-deb", "-x", deb, os.path.join(d, "x")], check=True)
        finally:
            shutil.rmtree(dl, ignore_errors=True)
        releases = os.listdir(os.path.join(d, "x", "lib", "modules"))
        assert len(releases) == 1, releases
        subprocess.run([BUSYBOX, "depmod", "-b", os.path.join(d, "x"), releases[0]], check=True)
        with open(done, "w") as f:
            f.write(releases[0] + "\n")
    with open(done) as f:
        release = f.read().strip()
    return d, release


INIT = r"""#!/bin/busybox sh
# Stage 1 (initramfs): the shares, a tmpfs root, then stage 2 on it.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules/order); do insmod /modules/$m || echo "stage1: insmod $m failed"; done
r=/newroot
mkdir -p $r
mount -t tmpfs -o mode=0755,size=2g tmpfs $r
cd $r
mkdir -p usr etc proc sys dev run tmp var root scratch sbx-guest
mkdir -p .modroot/bin .modroot/lib/modules
cp /bin/busybox .modroot/bin/busybox
ln -s usr/bin bin; ln -s usr/sbin sbin; ln -s usr/lib lib; ln -s usr/lib64 lib64
opts=trans=virtio,version=9p2000.L,msize=262144
# Read-only as a host's /usr is: the mount, not the file system (QEMU's
# readonly=on refuses writes underneath). A read-only superblock would
# answer EROFS where a host answers EACCES.
mount -t 9p -o $opts ctl $r/sbx-guest
mount -t ext4 /dev/vda $r/scratch
mkdir -p $r/scratch/tmp $r/scratch/var
chmod 1777 $r/scratch/tmp
mount --bind $r/scratch/tmp $r/tmp
mount --bind $r/scratch/var $r/var
mkdir -p $r/var/lib $r/var/tmp $r/var/cache $r/var/log
chmod 1777 $r/var/tmp
# The checkout last: it may live under /tmp or /var (a CI clone does).
mkdir -p $r/@CHECKOUT@
for share in usr:usr etc:etc modules:.modroot/lib/modules checkout:@CHECKOUT@; do
  mount -t 9p -o $opts,cache=loose ${share%%:*} $r/${share#*:}
  mount -o remount,bind,ro $r/${share#*:}
done
mount --move /proc $r/proc
mount --move /sys $r/sys
mount --move /dev $r/dev
exec switch_root $r /sbx-guest/stage2
"""

# Stage 2 (the tmpfs root, still PID 1): a systemd host's cgroup layout,
# then the command in its delegated service.
STAGE2 = r"""#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 SBX_TEST_EMULATED=1
mkdir -p /dev/pts /dev/shm /dev/mqueue
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts /dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup
echo /sbx-guest/modprobe > /proc/sys/kernel/modprobe
hostname sbx-guest
ip link set lo up
# A host has an address besides loopback (tests check sandboxes cannot
# reach it): a dummy interface on TEST-NET-1.
ip link add sbx0 type dummy && ip addr add 192.0.2.10/24 dev sbx0 && ip link set sbx0 up
cg=/sys/fs/cgroup
all="+cpu +memory +pids +io"
mkdir $cg/init.scope
echo $$ > $cg/init.scope/cgroup.procs
echo "$all" > $cg/cgroup.subtree_control
mkdir $cg/system.slice
echo "$all" > $cg/system.slice/cgroup.subtree_control
mkdir $cg/system.slice/sbx-test.service
cd @CHECKOUT@
# The service: its own cgroup, delegated (as systemd's Delegate=yes).
sh -c 'echo $$ > /sys/fs/cgroup/system.slice/sbx-test.service/cgroup.procs && exec /bin/sh /sbx-guest/command' </dev/null
echo $? > /sbx-guest/status
sync
poweroff -f
"""

# The kernel's module helper: busybox's modprobe in a root of its own,
# where /lib/modules is the package's tree (the host's /usr has none).
# Stage 2 with --systemd: Debian's systemd becomes PID 1 and starts only
# sbx-guest.target, whose service runs the command (Delegate=yes, as the
# shipped sbx.service is). Units the command needs go in
# /run/systemd/system too (SBX_GUEST_UNITS: a directory of unit files).
STAGE2_SYSTEMD = r"""#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
mkdir -p /run/systemd/system
cat > /run/systemd/system/sbx-guest.target <<'UNIT'
[Unit]
Description=sbx guest test
DefaultDependencies=no
Requires=sbx-guest.service
Wants=systemd-journald.service
After=sbx-guest.service
UNIT
cat > /run/systemd/system/sbx-guest.service <<'UNIT'
[Unit]
Description=sbx guest test command
DefaultDependencies=no
After=systemd-journald.service
[Service]
Type=oneshot
Delegate=yes
WorkingDirectory=@CHECKOUT@
Environment=HOME=/root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 SBX_TEST_EMULATED=1 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
StandardInput=null
StandardOutput=tty
StandardError=tty
TTYPath=/dev/console
ExecStart=/bin/sh -c 'ip link set lo up; echo /sbx-guest/modprobe > /proc/sys/kernel/modprobe; ip link add sbx0 type dummy && ip addr add 192.0.2.10/24 dev sbx0 && ip link set sbx0 up; /bin/sh /sbx-guest/command; echo $? > /sbx-guest/status; sync; systemctl poweroff -ff'
UNIT
if [ -d /sbx-guest/units ]; then cp /sbx-guest/units/* /run/systemd/system/; fi
exec /lib/systemd/systemd --unit=sbx-guest.target --show-status=0 --log-level=warning
"""

MODPROBE = r"""#!/bin/sh
exec /usr/sbin/chroot /.modroot /bin/busybox modprobe "$@"
"""


def cpio_newc(entries, out):
    """entries: (name, mode, data or None for a directory, or a symlink
    target with mode S_IFLNK)."""
    ino = 1
    with open(out, "wb") as f:
        def put(name, mode, data):
            nonlocal ino
            nb = name.encode() + b"\0"
            hdr = "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x" % (
                ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0)
            ino += 1
            f.write(hdr.encode() + nb)
            f.write(b"\0" * ((4 - (110 + len(nb)) % 4) % 4))
            f.write(data)
            f.write(b"\0" * ((4 - len(data) % 4) % 4))
        for name, mode, data in entries:
            put(name, mode, data)
        put("TRAILER!!!", 0, b"")


def module_load_order(moddir, wanted):
    """Paths (relative to moddir) of wanted and what they need, each after
    its dependencies; names a kernel has built in are left out."""
    deps = {}
    with open(os.path.join(moddir, "modules.dep")) as f:
        for line in f:
            mod, _, rest = line.partition(":")
            deps[mod] = rest.split()
    by_name = {os.path.basename(m).split(".ko")[0].replace("-", "_"): m for m in deps}
    order = []

    def visit(m):
        if m in order:
            return
        for d in deps[m]:
            visit(d)
        order.append(m)
    for name in wanted:
        if name in by_name:
            visit(by_name[name])
    return order


def build_initramfs(kdir, release, work):
    moddir = os.path.join(kdir, "x", "lib", "modules", release)
    entries = [(d, 0o40755, b"") for d in ("bin", "dev", "proc", "sys", "modules", "newroot")]
    with open(BUSYBOX, "rb") as f:
        entries.append(("bin/busybox", 0o100755, f.read()))
    order = []
    for m in module_load_order(moddir, STAGE1_MODULES):
        with open(os.path.join(moddir, m), "rb") as f:
            entries.append(("modules/" + os.path.basename(m), 0o100644, f.read()))
        order.append(os.path.basename(m))
    entries.append(("modules/order", 0o100644, ("\n".join(order) + "\n").encode()))
    entries.append(("init", 0o100755, INIT.replace("@CHECKOUT@", ROOT.lstrip("/")).encode()))
    out = os.path.join(work, "initramfs.cpio")
    cpio_newc(entries, out)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default=DEFAULT_KERNEL, help="Debian kernel package (a glob)")
    ap.add_argument("--suite", help="the Debian suite to take it from, when not this machine's")
    ap.add_argument("--mem", type=int, default=6144)
    ap.add_argument("--smp", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--disk", default="16G", help="size of the sparse ext4 scratch disk")
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--systemd", action="store_true",
                    help="boot Debian's systemd as PID 1 and run COMMAND as a delegated service")
    ap.add_argument("--units", help="a directory of unit files to install in the guest")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command")
    package = resolve_package(a.kernel, a.suite)
    kdir, release = prepare_kernel(package, a.suite)
    work = tempfile.mkdtemp(prefix="sbx-guest-")
    proc = None
    try:
        ctl = os.path.join(work, "ctl")
        os.mkdir(ctl)
        with open(os.path.join(ctl, "command"), "w") as f:
            f.write("cd %s && exec %s\n" % (shlex.quote(ROOT), " ".join(shlex.quote(c) for c in cmd)))
        with open(os.path.join(ctl, "stage2"), "w") as f:
            f.write((STAGE2_SYSTEMD if a.systemd else STAGE2).replace("@CHECKOUT@", ROOT))
        if a.units:
            shutil.copytree(a.units, os.path.join(ctl, "units"))
        os.chmod(os.path.join(ctl, "stage2"), 0o755)
        with open(os.path.join(ctl, "modprobe"), "w") as f:
            f.write(MODPROBE)
        os.chmod(os.path.join(ctl, "modprobe"), 0o755)
        initrd = build_initramfs(kdir, release, work)
        disk = os.path.join(work, "scratch.img")
        subprocess.run(["truncate", "-s", a.disk, disk], check=True)
        subprocess.run(["mke2fs", "-q", "-t", "ext4", "-F", disk], check=True)
        shares = [("usr", "/usr"), ("etc", "/etc"),
                  ("modules", os.path.join(kdir, "x", "lib", "modules")),
                  ("checkout", ROOT), ("ctl", ctl)]
        qemu = ["qemu-system-x86_64", "-M", "pc,hpet=on", "-accel", os.environ.get("SBX_GUEST_ACCEL", "tcg,thread=multi"),
                "-cpu", os.environ.get("SBX_GUEST_CPU", "max"), "-m", str(a.mem), "-smp", str(a.smp), "-nodefaults",
                "-no-user-config", "-nographic", "-serial", "stdio", "-no-reboot",
                "-kernel", os.path.join(kdir, "x", "boot", "vmlinuz-" + release),
                "-initrd", initrd,
                "-append", os.environ.get("SBX_GUEST_APPEND", "") + " console=ttyS0 loglevel=" + os.environ.get("SBX_GUEST_LOGLEVEL", "4") + " panic=-1 rdinit=/init "
                           "systemd.unified_cgroup_hierarchy=1",
                "-drive", "file=%s,if=none,id=scratch,format=raw,cache=unsafe" % disk,
                "-device", "virtio-blk-pci,drive=scratch"]
        for i, (tag, path) in enumerate(shares):
            ro = ",readonly=on" if tag not in ("ctl",) else ""
            qemu += ["-fsdev", "local,id=fs%d,path=%s,security_model=passthrough%s" % (i, path, ro),
                     "-device", "virtio-9p-pci,fsdev=fs%d,mount_tag=%s" % (i, tag)]
        log("booting %s (%s), %d MiB, %d vCPUs" % (package, release, a.mem, a.smp))
        t0 = time.time()
        proc = subprocess.Popen(qemu, stdin=subprocess.DEVNULL)
        try:
            proc.wait(a.timeout)
        except subprocess.TimeoutExpired:
            log("timed out after %d s" % a.timeout)
            proc.kill()
            proc.wait()
            return 124
        log("guest ended after %.0f s" % (time.time() - t0))
        try:
            with open(os.path.join(ctl, "status")) as f:
                return int(f.read().strip() or 1)
        except (OSError, ValueError):
            log("the guest left no exit status (a panic?)")
            return 125
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
