#!/usr/bin/env bash
# Build the guest of the molecule `kernel` scenario: Debian 12's 6.1 kernel and a small Debian root (python3, sshd,
# kmod, iproute2) packed as its initramfs, booted under QEMU TCG by tests/kernel/guest.py (tests/kernel/README.md):
#
#   bash tests/kernel/build_guest.sh [CACHE_DIR]        (as root; default CACHE_DIR: <repo>/.cache/kernel)
#
# - the ABI comes from the candidate `linux-image-amd64` of this machine's apt at run time (its one dependency
#   `linux-image-<abi>`); that package is fetched with `apt-get download` and unpacked with `dpkg-deb -x` into
#   CACHE_DIR/image/<abi>/, never installed here (installing rewrites /boot and the initramfs of this machine);
# - the root is `debootstrap --variant=minbase` from the Debian mirror apt already uses (/etc/apt/sources.list*),
#   trimmed and kept as CACHE_DIR/rootfs/base-<suite>.tar.zst;
# - the initramfs (CACHE_DIR/guest/<abi>/initrd.img) is that root plus the kernel's module subset (thunderbolt,
#   thunderbolt_net, virtio pci/net/rng and whatever they depend on, modules.order and modules.builtin*, then
#   `depmod -b`), an /init that brings up the network and sshd, and root's authorized_keys from an ed25519 key pair
#   this script generates once in CACHE_DIR/ssh/; packed with `cpio | zstd -3`;
# - missing tools (qemu-system-x86, debootstrap, cpio) are installed with apt-get --no-install-recommends, and the
#   packages that came with them are named on stderr.
# Every step keeps a stamp of its inputs, the step's own code included (`declare -f`), and is skipped when its stamp
# matches: a second run with nothing new takes a second or two. One run at a time per CACHE_DIR (flock).
# CACHE_DIR may be shared with tests/kernel/fetch_sources.sh: this script only writes its own entries there (debs/
# linux-image-*, image/, rootfs/, ssh/, guest/, guest.json, .build_guest.lock) and never clears CACHE_DIR.
# stdout is one JSON object: {abi, vmlinuz, initrd, ssh_key, build_seconds, cached, image_version, image_root}
# (cached: nothing had to be downloaded or built); CACHE_DIR/guest.json holds the same paths for guest.py. Progress
# goes to stderr.
set -euo pipefail
trap 'echo "build_guest: $0 failed at line $LINENO: $BASH_COMMAND" >&2' ERR

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
CACHE=${1:-$ROOT/.cache/kernel}
SUITE=bookworm
KERNEL_SERIES=6.1
KERNEL_META=linux-image-amd64
# systemd-sysv: systemd as PID 1, for the process managers' real systemd path (bookworm's minbase has no init)
ROOT_PACKAGES=(python3-minimal python3 openssh-server kmod iproute2 systemd-sysv)
GUEST_MODULES=(thunderbolt thunderbolt_net virtio_pci virtio_net virtio_rng)
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
export DEBIAN_FRONTEND=noninteractive LC_ALL=C

log() { echo "build_guest: $*" >&2; }
die() { log "$*"; exit 2; }

[[ $EUID -eq 0 ]] || die "needs root (debootstrap, apt-get, device nodes in the initramfs)"
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd -P)
exec 9>"$CACHE/.build_guest.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/.build_guest.lock; waiting"
  flock 9
fi
start=$SECONDS
built=()

# apt-get with one `apt-get update` and a retry when the package lists are missing or stale (404 on download).
apt_updated=0
apt_update_once() {
  if (( apt_updated == 0 )); then
    log "apt-get update"
    apt-get update -qq >&2
    apt_updated=1
  fi
}
apt_retry() {
  if "$@" >&2; then
    return 0
  fi
  (( apt_updated == 0 )) || return 1
  apt_update_once
  "$@" >&2
}
candidate() {
  apt-cache policy "$1" 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" {print $2}'
}

# --- 0. tools ---------------------------------------------------------------------------------------------------
# shellcheck source=/dev/null
. /etc/os-release
[[ ${VERSION_CODENAME:-} == "$SUITE" ]] \
  || die "needs Debian 12 ($SUITE) and its apt for the $KERNEL_SERIES kernel; this is ${PRETTY_NAME:-unknown}"
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v cpio >/dev/null || need+=(cpio)
command -v zstd >/dev/null || need+=(zstd)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
command -v depmod >/dev/null || need+=(kmod)
[[ -f $KEYRING ]] || need+=(debian-archive-keyring)
if (( ${#need[@]} )); then
  before=$(dpkg-query -W -f '${db:Status-Abbrev} ${binary:Package}\n' | awk '$1 == "ii" {print $2}' | sort)
  log "installing ${need[*]} (--no-install-recommends)"
  apt_retry apt-get install -y -qq --no-install-recommends "${need[@]}"
  after=$(dpkg-query -W -f '${db:Status-Abbrev} ${binary:Package}\n' | awk '$1 == "ii" {print $2}' | sort)
  new=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | tr '\n' ' ')
  log "installed $(wc -w <<<"$new") packages: $new"
fi

# --- 1. the kernel image package --------------------------------------------------------------------------------
meta_version=$(candidate "$KERNEL_META")
if [[ -z $meta_version ]]; then
  apt_update_once
  meta_version=$(candidate "$KERNEL_META")
fi
[[ -n $meta_version ]] || die "apt knows no $KERNEL_META; is Debian's main component in /etc/apt/sources.list*?"
ABI=$(apt-cache show "$KERNEL_META=$meta_version" | sed -n 's/^Depends: //p' | head -n 1 \
  | grep -oE 'linux-image-[0-9][^ ,]*' | head -n 1 | sed 's/^linux-image-//')
[[ $ABI == "$KERNEL_SERIES".* ]] || die "$KERNEL_META $meta_version depends on kernel ABI '$ABI', not $KERNEL_SERIES"
IMAGE_PKG=linux-image-$ABI
IMAGE_VERSION=$(candidate "$IMAGE_PKG")
[[ -n $IMAGE_VERSION ]] || die "apt has no candidate for $IMAGE_PKG"
IMAGE_ROOT=$CACHE/image/$ABI
VMLINUZ=$IMAGE_ROOT/boot/vmlinuz-$ABI
MODULES=$IMAGE_ROOT/lib/modules/$ABI
log "kernel: $KERNEL_META $meta_version -> $IMAGE_PKG $IMAGE_VERSION"

image_stamp="$IMAGE_PKG $IMAGE_VERSION"
if [[ ! -f $IMAGE_ROOT/.inferlab-image || $(<"$IMAGE_ROOT/.inferlab-image") != "$image_stamp" ]]; then
  debs=$CACHE/debs
  deb=$(compgen -G "$debs/${IMAGE_PKG}_*.deb" | while read -r f; do
          if [[ $(dpkg-deb -f "$f" Version) == "$IMAGE_VERSION" ]]; then echo "$f"; fi
        done | head -n 1 || true)
  if [[ -z $deb ]]; then
    log "apt-get download $IMAGE_PKG=$IMAGE_VERSION"
    rm -rf "$debs/.guest-partial" && mkdir -p "$debs/.guest-partial"
    (cd "$debs/.guest-partial" && apt_retry apt-get download -qq -o APT::Sandbox::User=root "$IMAGE_PKG=$IMAGE_VERSION")
    for f in "$debs/.guest-partial"/*.deb; do
      mv -f "$f" "$debs/"
      deb=$debs/$(basename "$f")
    done
    rmdir "$debs/.guest-partial"
    built+=(download)
  fi
  [[ -n $deb && -f $deb ]] || die "no .deb for $IMAGE_PKG $IMAGE_VERSION in $debs"
  log "dpkg-deb -x $(basename "$deb") (not installed)"
  rm -rf "$IMAGE_ROOT" "$IMAGE_ROOT.tmp"
  mkdir -p "$IMAGE_ROOT.tmp"
  dpkg-deb -x "$deb" "$IMAGE_ROOT.tmp"
  # The package ships no modules.dep (its postinst runs depmod); generate it inside the unpacked tree.
  depmod -b "$IMAGE_ROOT.tmp" "$ABI"
  printf '%s\n' "$image_stamp" >"$IMAGE_ROOT.tmp/.inferlab-image"
  mv "$IMAGE_ROOT.tmp" "$IMAGE_ROOT"
  built+=(image)
fi
[[ -f $VMLINUZ && -d $MODULES ]] || die "$IMAGE_ROOT lacks boot/vmlinuz-$ABI or lib/modules/$ABI"

# --- 2. the Debian root (debootstrap) ---------------------------------------------------------------------------
# The Debian mirror apt uses for the suite's main component (one-line and deb822 sources alike).
# shellcheck disable=SC2016 # apt's own $(FIELD) format, not a shell expansion
MIRROR=$(apt-get indextargets --format '$(CODENAME) $(COMPONENT) $(ORIGIN) $(REPO_URI)' 'Identifier: Packages' \
  | awk -v s="$SUITE" '$1 == s && $2 == "main" && $3 == "Debian" {print $4; exit}')
[[ -n $MIRROR ]] || die "no Debian mirror for '$SUITE main' in /etc/apt/sources.list* (apt-get indextargets)"

# Trimmed after debootstrap: documentation, manuals, translations, apt's lists and caches, logs.
build_base() {
  local dir=$1
  debootstrap --variant=minbase --include="$(IFS=,; echo "${ROOT_PACKAGES[*]}")" --keyring="$KEYRING" \
    "$SUITE" "$dir" "$MIRROR" >&2
  rm -rf "$dir"/usr/share/{doc,man,info,locale,lintian,linda,bug,bash-completion} \
    "$dir"/var/cache/apt/* "$dir"/var/lib/apt/lists/* "$dir"/var/cache/debconf/*-old "$dir"/var/log/*
  find "$dir/usr/share/zoneinfo" -mindepth 1 -maxdepth 1 ! -name UTC ! -name Etc -exec rm -rf {} + 2>/dev/null || true
}
BASE=$CACHE/rootfs/base-$SUITE.tar.zst
base_stamp=$(printf '%s\n' "$SUITE $MIRROR" "${ROOT_PACKAGES[*]}" "$(declare -f build_base)" | sha256sum | cut -c1-64)
if [[ ! -f $BASE || ! -f $BASE.stamp || $(<"$BASE.stamp") != "$base_stamp" ]]; then
  log "debootstrap --variant=minbase $SUITE from $MIRROR with ${ROOT_PACKAGES[*]}"
  tmp=$CACHE/rootfs/base.tmp
  rm -rf "$tmp" && mkdir -p "$tmp"
  t0=$SECONDS
  build_base "$tmp"
  tar -C "$tmp" --numeric-owner -cpf - . | zstd -3 -T0 -q >"$BASE.tmp"
  mv -f "$BASE.tmp" "$BASE"
  printf '%s\n' "$base_stamp" >"$BASE.stamp"
  rm -rf "$tmp"
  log "root: $(du -h "$BASE" | cut -f1) after $((SECONDS - t0)) s"
  built+=(rootfs)
fi

# --- 3. the SSH key pair ----------------------------------------------------------------------------------------
KEY=$CACHE/ssh/id_ed25519
if [[ ! -f $KEY || ! -f $KEY.pub ]]; then
  mkdir -p "$CACHE/ssh" && chmod 0700 "$CACHE/ssh"
  rm -f "$KEY" "$KEY.pub"
  ssh-keygen -q -t ed25519 -N '' -C inferlab-kernel-guest -f "$KEY"
  built+=(key)
fi

# --- 4. the initramfs -------------------------------------------------------------------------------------------
# The guest's /init: the virtio modules (modules in Debian's kernel), then systemd as PID 1 (exec keeps the pid),
# which boots default.target as a normal system (no /etc/initrd-release: systemd's initrd mode is off). The first
# non-lo interface on QEMU's user network (reaches nothing: restrict=on) comes up in a oneshot unit before sshd.
init_script() {
  cat <<'EOF'
#!/bin/sh
# inferlab kernel guest: /init, PID 1 until it hands over to systemd (written by tests/kernel/build_guest.sh)
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
for m in virtio_pci virtio_net virtio_rng; do
  modprobe "$m" || echo "inferlab-guest: modprobe $m failed"
done
echo "inferlab-guest: kernel $(uname -r), handing over to systemd"
exec /lib/systemd/systemd
EOF
}
guest_net_script() {
  cat <<'EOF'
#!/bin/sh
# inferlab kernel guest: the first non-lo interface on QEMU's user network (written by tests/kernel/build_guest.sh)
set -e
ip link set lo up
for n in /sys/class/net/*; do
  n=${n##*/}
  if [ "$n" != lo ]; then
    ip addr add 10.0.2.15/24 dev "$n"
    ip link set "$n" up
    ip route add default via 10.0.2.2
    echo "inferlab-guest: interface $n"
    exit 0
  fi
done
echo "inferlab-guest: no interface"
exit 1
EOF
}
guest_net_unit() {
  cat <<'EOF'
[Unit]
Description=inferlab kernel guest: QEMU user network
DefaultDependencies=no
After=systemd-modules-load.service
Before=network.target ssh.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/inferlab-guest-net

[Install]
WantedBy=multi-user.target
EOF
}
make_initrd() {
  local work=$1 out=$2 rel m
  mkdir -p "$work"
  zstd -dc -q "$BASE" | tar -C "$work" --numeric-owner -xpf -
  # The module subset, with everything modprobe says it needs.
  for m in "${GUEST_MODULES[@]}"; do
    modprobe -d "$IMAGE_ROOT" -S "$ABI" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
  done | sort -u | while read -r rel; do
    rel=${rel#"$IMAGE_ROOT"/}
    mkdir -p "$work/$(dirname "$rel")"
    cp -p "$IMAGE_ROOT/$rel" "$work/$rel"
  done
  for m in modules.order modules.builtin modules.builtin.modinfo; do
    cp -p "$MODULES/$m" "$work/lib/modules/$ABI/"
  done
  depmod -b "$work" "$ABI"
  for m in "${GUEST_MODULES[@]}"; do
    modinfo -b "$work" -k "$ABI" -F filename "$m" >/dev/null \
      || { log "module $m is missing from the initramfs"; return 1; }
  done
  init_script >"$work/init"
  chmod 0755 "$work/init"
  guest_net_script >"$work/usr/local/sbin/inferlab-guest-net"
  chmod 0755 "$work/usr/local/sbin/inferlab-guest-net"
  guest_net_unit >"$work/etc/systemd/system/inferlab-guest-net.service"
  mkdir -p "$work/etc/systemd/system/multi-user.target.wants"
  ln -sfn /etc/systemd/system/inferlab-guest-net.service \
    "$work/etc/systemd/system/multi-user.target.wants/inferlab-guest-net.service"
  ln -sfn /lib/systemd/system/ssh.service "$work/etc/systemd/system/multi-user.target.wants/ssh.service"
  # masked: login prompts, time sync, timers and mounts or modules nothing in a guest that lives minutes uses (each
  # costs boot time under TCG)
  for u in getty@tty1.service serial-getty@ttyS0.service getty-static.service systemd-timesyncd.service \
      apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer e2scrub_reap.service \
      fstrim.timer dev-hugepages.mount dev-mqueue.mount sys-kernel-debug.mount sys-kernel-tracing.mount \
      modprobe@dm_mod.service modprobe@efi_pstore.service modprobe@fuse.service modprobe@loop.service; do
    ln -sfn /dev/null "$work/etc/systemd/system/$u"
  done
  # sshd: key-only root login, no PAM, no DNS look-ups (the drop-in is read before the stock settings).
  mkdir -p "$work/etc/ssh/sshd_config.d"
  printf '%s\n' 'PermitRootLogin prohibit-password' 'PasswordAuthentication no' 'KbdInteractiveAuthentication no' \
    'UsePAM no' 'UseDNS no' >"$work/etc/ssh/sshd_config.d/inferlab.conf"
  install -d -m 0700 "$work/root/.ssh"
  install -m 0600 "$KEY.pub" "$work/root/.ssh/authorized_keys"
  printf 'inferlab-guest\n' >"$work/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 inferlab-guest\n' >"$work/etc/hosts"
  : >"$work/etc/resolv.conf"
  # The kernel opens /dev/console before /init runs.
  rm -f "$work/dev/console" && mknod -m 0600 "$work/dev/console" c 5 1
  (cd "$work" && find . -mindepth 1 -print0 | sort -z \
    | cpio --null --create --format=newc --quiet --reproducible) | zstd -3 -T0 -q >"$out"
}
GUEST=$CACHE/guest/$ABI
INITRD=$GUEST/initrd.img
initrd_stamp=$(printf '%s\n' "$image_stamp" "$base_stamp" "$(<"$KEY.pub")" "${GUEST_MODULES[*]}" \
  "$(declare -f init_script guest_net_script guest_net_unit make_initrd)" | sha256sum | cut -c1-64)
if [[ ! -f $INITRD || ! -f $INITRD.stamp || $(<"$INITRD.stamp") != "$initrd_stamp" ]]; then
  log "initramfs: root + modules ${GUEST_MODULES[*]} + /init"
  mkdir -p "$GUEST"
  rm -rf "$GUEST/work"
  make_initrd "$GUEST/work" "$INITRD.tmp"
  rm -rf "$GUEST/work"
  mv -f "$INITRD.tmp" "$INITRD"
  printf '%s\n' "$initrd_stamp" >"$INITRD.stamp"
  log "initramfs: $(du -h "$INITRD" | cut -f1)"
  built+=(initrd)
fi

# --- 5. summary -------------------------------------------------------------------------------------------------
cached=true
if (( ${#built[@]} )); then
  cached=false
  log "built: ${built[*]}"
fi
python3 - "$CACHE/guest.json" "$ABI" "$VMLINUZ" "$INITRD" "$KEY" "$((SECONDS - start))" "$cached" \
  "$IMAGE_VERSION" "$IMAGE_ROOT" <<'EOF'
import json
import os
import sys

path, abi, vmlinuz, initrd, key, seconds, cached, version, image_root = sys.argv[1:]
guest = {"abi": abi, "vmlinuz": vmlinuz, "initrd": initrd, "ssh_key": key, "image_version": version,
         "image_root": image_root}
with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(guest, f, indent=1, sort_keys=True)
    f.write("\n")
os.replace(path + ".tmp", path)
summary = {"abi": abi, "vmlinuz": vmlinuz, "initrd": initrd, "ssh_key": key, "build_seconds": int(seconds),
           "cached": cached == "true", "image_version": version, "image_root": image_root}
print(json.dumps(summary, sort_keys=True))
EOF
