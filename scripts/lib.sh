# Shared helpers for the provisioning scripts. Sourced, never run.
# shellcheck shell=bash

# Everything heavy lives outside the repository, keyed by what produced it.
NVPM_CACHE=${NVPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvidia-peermem-rs}
# The trixie root; bump the suffix when its layout changes. Packages are
# added to it incrementally (ensure_packages), so the list may grow freely.
CHROOT=$NVPM_CACHE/trixie-v1
CHROOT_PACKAGES="make gcc-14 gcc bc bison flex libssl-dev libelf-dev python3 kmod cpio \
xz-utils zstd dwarves rustc rust-src rustfmt rust-clippy bindgen libclang1-19 libclang-19-dev \
llvm-19 qemu-system-x86 busybox-static file binutils ca-certificates clang-19 lld-19 \
libdw-dev"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The Debian archive URIs come from the machine's apt sources, never from this repo.
apt_uri() { # $1 = last path component to match: "debian" or "debian-security"
	local f u
	for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		u=$(sed -n -e 's/^URIs:[[:space:]]*//p' -e 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' "$f" |
			tr ' ' '\n' | grep -E "/$1/?\$" | head -n1)
		[ -n "$u" ] && { printf '%s\n' "${u%/}"; return 0; }
	done
	return 1
}

# Bootstraps a minimal Debian trixie into $1 from the machine's archive, with
# apt sources for main, updates, security (if the machine has one) and
# backports; $2 = debootstrap's log, $3 = the progress line to show, $4 =
# debootstrap's --arch=ARCH for another architecture (run through qemu-user).
debootstrap_trixie() { # $1 = dir, $2 = log file, $3 = message[, $4 = --arch=ARCH]
	debootstrap_debian trixie main "$@"
	echo "deb $(apt_uri debian) trixie-backports main" >>"$1/etc/apt/sources.list"
}

# A Debian root of SUITE with COMPONENTS, its updates and security suites.
debootstrap_debian() { # $1 = suite, $2 = components, $3 = dir, $4 = log file, $5 = message[, $6 = --arch=ARCH]
	local mirror security
	mirror=$(apt_uri debian) || die "no Debian archive URI in /etc/apt/sources*"
	security=$(apt_uri debian-security) || security=""
	if ! command -v debootstrap >/dev/null; then
		log "installing debootstrap on the host"
		apt-get -o DPkg::Lock::Timeout=900 update -qq
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq debootstrap >/dev/null
	fi
	log "$5"
	debootstrap --variant=minbase --include=ca-certificates ${6:+"$6"} "$1" "$3" "$mirror" >"$4" 2>&1 ||
		die "debootstrap failed, see $4"
	{
		echo "deb $mirror $1 $2"
		echo "deb $mirror $1-updates $2"
		[ -n "$security" ] && echo "deb $security $1-security $2"
	} >"$3/etc/apt/sources.list"
	cp /etc/resolv.conf "$3/etc/resolv.conf"
}

# Re-executes the calling script in a private mount namespace, so that the
# chroot's mounts vanish with it: nothing to clean up, no shared state
# between concurrent runs, and deleting the cache can never reach a mount.
enter_private_namespace() { # "$@" of the caller
	if [ -z "${NVPM_IN_NS:-}" ]; then
		NVPM_IN_NS=1 exec unshare -m --propagation private "$0" "$@"
	fi
}

# Mounts what the chroot needs: proc, a private devpts, the repo at /src.
chroot_mount() { # $1 = repo dir (optional)
	mount -t proc proc "$CHROOT/proc"
	mkdir -p "$CHROOT/dev/pts" "$CHROOT/src"
	mount -t devpts -o newinstance,ptmxmode=0666 devpts "$CHROOT/dev/pts"
	[ -z "${1:-}" ] || mount --bind "$1" "$CHROOT/src"
}

# Runs a command inside the chroot with a clean environment (the host's rustup
# toolchain must never leak into the kernel build).
in_chroot() {
	chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb \
		LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# --- kernels of another architecture (KARCH, KTRIPLE; provision.sh and
# provision-carried.sh) ---

# What building and booting a foreign KARCH's kernel needs besides CHROOT_PACKAGES.
cross_packages() {
	echo "gcc-14-$KTRIPLE libc6-dev-$KARCH-cross cargo libstd-rust-dev:$KARCH"
	# arm64: Debian's .kernelvariables name a 32-bit compiler for the compat vDSO.
	case $KARCH in arm64) echo qemu-system-arm gcc-arm-linux-gnueabihf ;; esac
}

config_text() { sed -n "s/^$1=\"\(.*\)\"$/\1/p" "$2"; }

# The kernel's own make variables, from Debian's headers: ARCH,
# CROSS_COMPILE (and arm64's CROSS_COMPILE_COMPAT) from .kernelvariables, CC
# from the compiler its .config names.
kmake_flags() { # $1 = headers dir
	local arch cross compat cc
	arch=$(sed -n 's/^override ARCH = //p' "$1/.kernelvariables")
	cross=$(sed -n 's/^override CROSS_COMPILE = //p' "$1/.kernelvariables")
	compat=$(sed -n 's/^override CROSS_COMPILE_COMPAT = //p' "$1/.kernelvariables")
	cc=$(config_text CONFIG_CC_VERSION_TEXT "$1/.config")
	[ -n "$arch" ] && [ -n "$cross" ] && [ -n "$cc" ] || die "$1: no ARCH, CROSS_COMPILE or CC_VERSION_TEXT"
	echo "ARCH=$arch CROSS_COMPILE=$cross ${compat:+CROSS_COMPILE_COMPAT=$compat }CC=${cc%% *} HOSTCC=gcc-14 KERNELRELEASE=$KREL"
}

# A foreign KARCH's guest userland: busybox, kmod and dash of that
# architecture with the libraries they load, unpacked from Debian's packages
# (tests/guest/run.sh copies the root's own for an amd64 guest). kmod opens
# its decompressors with dlopen, so no dependency names them: liblzma and
# libzstd are asked for, or the guest's modinfo and modprobe
# --dump-modversions (scenario 02) read no .ko.xz.
ensure_userland() { # $1 = dir
	local pkgs d
	rm -rf "$1" "$1.debs" && mkdir -p "$1" "$1.debs"
	pkgs=$(in_chroot apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
		--no-replaces --no-enhances --no-pre-depends "busybox-static:$KARCH" "kmod:$KARCH" "dash:$KARCH" "liblzma5:$KARCH" "libzstd1:$KARCH" |
		sed -n "s/^\([a-z0-9][^ <>]*:$KARCH\)$/\1/p" | sort -u | tr '\n' ' ')
	[ -n "$pkgs" ] || die "no $KARCH packages for the guest userland"
	in_chroot sh -c "cd ${1#"$CHROOT"}.debs && apt-get download -qq -o APT::Sandbox::User=root $pkgs" ||
		die "apt-get download of the $KARCH guest userland failed"
	for d in "$1.debs"/*.deb; do dpkg-deb -x "$d" "$1"; done
	rm -rf "$1.debs"
}
