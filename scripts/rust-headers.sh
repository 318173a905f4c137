#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# rust-headers.sh: makes an installed distribution kernel's headers able to
# build out-of-tree Rust modules ("Recipe B", docs in README.md).
#
# Debian's linux-headers-$KREL carry the Rust config, Module.symvers with the
# kernel's Rust exports and a BTF vmlinux, but not the compiled Rust crates
# an out-of-tree module links against. This script builds them once per
# kernel from linux-source of the *same* version with the *same* toolchain
# the kernel's .config names (rustc, bindgen, gcc), caches the result and
# copies it into the headers:
#   rust/lib{core,compiler_builtins,ffi,build_error,...,kernel}.rmeta
#   rust/lib{macros,pin_init_internal,zerocopy_derive}.so   (proc macros)
#   scripts/target.json   (where the architecture's Makefile names one: x86)
#
# Usage:
#   rust-headers.sh [--source TARBALL|DIR] KREL [HEADERS_DIR]
#   rust-headers.sh --check KREL [HEADERS_DIR]   exit 0 if Rust-capable already
#   rust-headers.sh --dry-run KREL [HEADERS_DIR] exit 0 if a real run has all it
#                    needs, 1 with the list of what to install; changes nothing
#   rust-headers.sh --or-carried KREL [HEADERS_DIR]  as without it, but where the
#                    headers cannot be made Rust-capable, says why and exits 0:
#                    the module then carries the kernel's Rust support (carried
#                    mode, kbuild/rust-mode.sh chooses it)
#   rust-headers.sh --remove KREL                undo what it copied
#   rust-headers.sh --remove-all
#   rust-headers.sh --gc                         undo it where the headers are gone
# DKMS runs it as PRE_BUILD, with --or-carried. Nothing to do (exit 0) when the headers are
# already Rust-capable: a full kernel build tree, Ubuntu's headers with its
# linux-lib-rust-KREL package, Arch's linux-headers. On Ubuntu, headers
# without the crates get that package named instead of a rebuild.
#
# Env: NVPM_RUST_HEADERS_CACHE (default /var/cache/nvidia-peer-memory/rust-headers),
#      NVPM_JOBS (default: number of CPUs).
# Exit: 0 ready; 1 cannot be made ready (the message says what to install).
set -eu

CACHE=${NVPM_RUST_HEADERS_CACHE:-/var/cache/nvidia-peer-memory/rust-headers}
FORMAT=1 # bump when the overlay's content or layout changes
PATH=$PATH:/usr/sbin:/sbin

say() { echo "rust-headers: $*"; }
die() {
	echo "rust-headers: error: $*" >&2
	exit 1
}

# The files an out-of-tree Rust module needs, relative to the headers dir:
# the target spec only where the build made one (arm64 uses rustc's own
# aarch64-unknown-none targets).
overlay_files() ( # $1 = tree
	cd "$1" && find rust -maxdepth 1 \( -name '*.rmeta' -o -name '*.so' \) -type f | LC_ALL=C sort &&
		if [ -f scripts/target.json ]; then echo scripts/target.json; fi
)

# The arch Makefile kbuild reads for a tree: in it, or in the source tree
# that a headers or output directory's Makefile includes (Debian's flavour
# headers include linux-headers-<ver>-common's; O= builds: also source/).
arch_makefile() { # $1 = tree, $2 = SRCARCH
	for am_dir in "$1" "$1/source" "$(sed -n 's|^include \(/.*\)/Makefile$|\1|p' "$1/Makefile" 2>/dev/null | head -n 1)"; do
		[ -n "$am_dir" ] && [ -f "$am_dir/arch/$2/Makefile" ] && { echo "$am_dir/arch/$2/Makefile"; return 0; }
	done
	return 1
}

# Whether the kernel's rustc reads scripts/target.json: its arch Makefile
# names it (x86), as kbuild/rust-mode.sh decides. Without the arch Makefile,
# assume it does.
needs_target_json() { # $1 = headers dir
	nt_arch=$(sed -n -e 's/^CONFIG_X86=y$/x86/p' -e 's/^CONFIG_ARM64=y$/arm64/p' "$1/.config")
	[ -z "$nt_arch" ] || ! nt_mk=$(arch_makefile "$1" "$nt_arch") || grep -qs 'scripts/target\.json' "$nt_mk"
}

rust_ready() { # $1 = headers dir
	{ [ -f "$1/scripts/target.json" ] || ! needs_target_json "$1"; } &&
		[ -f "$1/rust/libkernel.rmeta" ] && [ -f "$1/rust/libmacros.so" ]
}

config_text() { sed -n "s/^$1=\"\(.*\)\"$/\1/p" "$2"; }

# The manifest lists the real paths of the copied files (scripts/ of Debian's
# headers is a symlink into linux-kbuild-*). Removing them also removes the
# directories they leave empty, up to two levels: after the headers package
# went away, only our files kept its directories. Files another kernel's
# overlay lists too (target.json, in the kbuild scripts/ that a kernel's
# flavours share) stay.
# shellcheck disable=SC2094 # $list is read, never written, in the loop
remove_overlay() { # $1 = KREL
	list=$CACHE/$1/installed
	[ -f "$list" ] || return 0
	while IFS= read -r f; do
		case $f in "#"* | "") continue ;; esac
		for other in "$CACHE"/*/installed; do
			[ "$other" != "$list" ] && [ -f "$other" ] && grep -qxF "$f" "$other" && continue 2
		done
		rm -f "$f"
		d=$(dirname "$f")
		{ rmdir "$d" && rmdir "$(dirname "$d")"; } 2>/dev/null || :
	done <"$list"
	rm -f "$list"
	say "removed the Rust overlay of $1"
}

case ${1:-} in
--remove)
	[ -n "${2:-}" ] || die "usage: rust-headers.sh --remove KREL"
	remove_overlay "$2"
	exit 0
	;;
--remove-all)
	for d in "$CACHE"/*/; do
		[ -d "$d" ] && remove_overlay "$(basename "$d")"
	done
	exit 0
	;;
--gc)
	for list in "$CACHE"/*/installed; do
		[ -f "$list" ] || continue
		hdr=$(sed -n 's/^# headers: //p' "$list")
		[ -f "$hdr/.config" ] || remove_overlay "$(basename "$(dirname "$list")")"
	done
	exit 0
	;;
esac

CHECK=
DRY=
SOURCE=
OR_CARRIED=
while :; do
	case ${1:-} in
	--check) CHECK=1; shift ;;
	--dry-run) DRY=1; shift ;;
	--or-carried) OR_CARRIED=1; shift ;;
	--source) SOURCE=${2:?--source needs a path}; shift 2 ;;
	-*) die "unknown option $1" ;;
	*) break ;;
	esac
done
KREL=${1:?usage: rust-headers.sh [--check|--dry-run|--or-carried] [--source PATH] KREL [HEADERS_DIR]}

# The headers cannot be made Rust-capable: an error, or with --or-carried
# the reason the build carries the kernel's Rust support instead.
cannot() {
	[ -n "$OR_CARRIED" ] || die "$*"
	say "$*"
	say "so nvidia_peermem carries the kernel's Rust support (carried mode): the build needs rustc, its rust-src, bindgen and libclang, not these"
	exit 0
}
HDR=${2:-/lib/modules/$KREL/build}
[ -e "$HDR" ] || HDR=/usr/src/linux-headers-$KREL
[ -d "$HDR" ] || die "no headers for $KREL (install linux-headers-$KREL)"
HDR=$(cd "$HDR" && pwd -P)
CONFIG=$HDR/.config
[ -f "$CONFIG" ] || die "$HDR has no .config"
grep -q '^CONFIG_RUST=y' "$CONFIG" || cannot "kernel $KREL is built without Rust support (CONFIG_RUST): its headers cannot be made Rust-capable"

if rust_ready "$HDR" && { [ ! -f "$CACHE/$KREL/installed" ] || [ -n "$CHECK" ]; }; then
	say "$HDR is Rust-capable already"
	exit 0
fi
[ -z "$CHECK" ] || die "$HDR is not Rust-capable (run rust-headers.sh $KREL)"

# Ubuntu ships the compiled crates of its kernels (linux-lib-rust-KREL, which
# links them into the headers): installing that is the fix there, and nothing
# is built. NVPM_OS_RELEASE: another os-release file (tests).
# shellcheck disable=SC1090 # os-release, or the tests' stand-in
os_id=$(. "${NVPM_OS_RELEASE:-/etc/os-release}" 2>/dev/null && echo "${ID:-}") || os_id=
if [ "$os_id" = ubuntu ]; then
	cannot "the headers of $KREL lack the kernel's compiled Rust crates; Ubuntu ships them: apt install linux-lib-rust-$KREL (then nothing needs building; the module builds with the rustc and bindgen $KREL names: $(config_text CONFIG_RUSTC_VERSION_TEXT "$CONFIG"), $(config_text CONFIG_BINDGEN_VERSION_TEXT "$CONFIG"))"
fi

# --- the toolchain the kernel's config names --------------------------------
RUSTC_WANT=$(config_text CONFIG_RUSTC_VERSION_TEXT "$CONFIG")
BINDGEN_WANT=$(config_text CONFIG_BINDGEN_VERSION_TEXT "$CONFIG")
CC_WANT=$(config_text CONFIG_CC_VERSION_TEXT "$CONFIG")
CC=${CC_WANT%% *}
missing=
have=$(rustc --version 2>/dev/null) || have="(none)"
[ "$have" = "$RUSTC_WANT" ] || missing="$missing
  rustc: the kernel needs '$RUSTC_WANT', PATH has '$have'"
have=$(bindgen --version 2>/dev/null) || have="(none)"
[ "$have" = "$BINDGEN_WANT" ] || missing="$missing
  bindgen: the kernel needs '$BINDGEN_WANT', PATH has '$have'"
have=$("$CC" --version 2>/dev/null | head -n1) || have="(none)"
[ "$have" = "$CC_WANT" ] || missing="$missing
  C compiler: the kernel needs '$CC_WANT', PATH has '$have'"
# What Debian's headers say the kernel was built with (.kernelvariables;
# other distributions' headers have none).
kvar() { [ ! -f "$HDR/.kernelvariables" ] || sed -n "s/^override $1 = //p" "$HDR/.kernelvariables"; }
arch=$(kvar ARCH)
cross=$(kvar CROSS_COMPILE)
cross_compat=$(kvar CROSS_COMPILE_COMPAT)
# arm64's 32-bit vDSO: Kconfig keeps COMPAT_VDSO only where a compat
# compiler is named (or clang and lld build it), and modules_prepare builds
# arch/arm64/kernel/vdso32 with $(CROSS_COMPILE_COMPAT)gcc.
if grep -q '^CONFIG_COMPAT_VDSO=y' "$CONFIG" &&
	! { grep -q '^CONFIG_CC_IS_CLANG=y' "$CONFIG" && grep -q '^CONFIG_LD_IS_LLD=y' "$CONFIG"; }; then
	if [ -z "$cross_compat" ]; then
		missing="$missing
  compat vDSO compiler: the kernel has CONFIG_COMPAT_VDSO, but its headers do not name the 32-bit ARM compiler it was built with (CROSS_COMPILE_COMPAT)"
	elif ! command -v "${cross_compat}gcc" >/dev/null 2>&1; then
		missing="$missing
  compat vDSO compiler: the kernel's 32-bit vDSO (CONFIG_COMPAT_VDSO) is built with ${cross_compat}gcc, which PATH lacks (Debian: apt-get install gcc-${cross_compat%-})"
	fi
fi
sysroot=$(rustc --print sysroot 2>/dev/null) || sysroot=/nonexistent
[ -f "$sysroot/lib/rustlib/src/rust/library/core/src/lib.rs" ] || missing="$missing
  rust-src: the Rust standard library source for that rustc is not installed"

# --- linux-source of the same version ---------------------------------------
# Debian: the headers' package version must equal linux-source-X.Y's.
hdr_pkg='' hdr_ver='' src_pkg='' src_ver=''
if command -v dpkg-query >/dev/null 2>&1; then
	hdr_pkg=$(dpkg-query -S "$HDR/.config" 2>/dev/null | sed -n '1s/:.*//p') || :
	[ -z "$hdr_pkg" ] || hdr_ver=$(dpkg-query -W -f '${Version}' "$hdr_pkg" 2>/dev/null) || :
fi
upstream=${KREL%%[-+]*}
series=$(echo "$upstream" | cut -d. -f1-2)
if [ -z "$SOURCE" ]; then
	for s in /usr/src/linux-source-"$series".tar.xz /usr/src/linux-source-"$series".tar.* /usr/src/linux-source-"$series"; do
		[ -e "$s" ] && { SOURCE=$s; break; }
	done
fi
if [ -z "$SOURCE" ]; then
	missing="$missing
  linux-source: no /usr/src/linux-source-$series.tar.xz (Debian: apt-get install linux-source-$series${hdr_ver:+=$hdr_ver})"
elif [ -n "$hdr_ver" ] && src_pkg=$(dpkg-query -S "$SOURCE" 2>/dev/null | sed -n '1s/:.*//p') && [ -n "$src_pkg" ]; then
	src_ver=$(dpkg-query -W -f '${Version}' "$src_pkg")
	[ "$src_ver" = "$hdr_ver" ] || missing="$missing
  linux-source: $src_pkg is $src_ver but $hdr_pkg is $hdr_ver (apt-get install $src_pkg=$hdr_ver)"
fi
if [ -n "$missing" ]; then
	cannot "cannot make the headers of $KREL Rust-capable; install the matching versions of:$missing"
fi
if [ -n "$DRY" ]; then
	say "$HDR can be made Rust-capable (the toolchain and $SOURCE match)"
	exit 0
fi

# --- the overlay, built once per kernel and toolchain ------------------------
key=$(printf '%s\n' "$FORMAT" "$KREL" "$hdr_pkg=$hdr_ver" "$src_pkg=$src_ver" "$RUSTC_WANT" "$BINDGEN_WANT" "$CC_WANT" \
	"$(sha256sum "$CONFIG" | cut -c1-64)" | sha256sum | cut -c1-16)
store=$CACHE/$KREL/$key
if [ ! -f "$store/.complete" ]; then
	t0=$(date +%s)
	mkdir -p "$CACHE/$KREL"
	rm -rf "$CACHE/$KREL"/*.tmp
	work=$(mktemp -d "${TMPDIR:-/var/tmp}/nvpm-rust-headers.XXXXXX")
	trap 'rm -rf "$work"' EXIT INT TERM
	say "building the Rust overlay for $KREL from $SOURCE (once per kernel, a few minutes)"
	if [ -d "$SOURCE" ]; then
		cp -a "$SOURCE" "$work/src"
	else
		mkdir "$work/src"
		tar -xf "$SOURCE" -C "$work/src" --strip-components=1
	fi
	src_rel=$(make -s -C "$work/src" kernelversion 2>/dev/null) || src_rel=unknown
	[ "$src_rel" = "$upstream" ] || die "$SOURCE is Linux $src_rel, the headers are $upstream"
	cp "$CONFIG" "$work/src/.config"
	set -- -C "$work/src" ${arch:+ARCH=$arch} ${cross:+CROSS_COMPILE=$cross} \
		${cross_compat:+CROSS_COMPILE_COMPAT=$cross_compat} CC="$CC" HOSTCC="$CC" KERNELRELEASE="$KREL"
	make -s "$@" olddefconfig
	cmp -s "$CONFIG" "$work/src/.config" ||
		die "olddefconfig changed $KREL's .config: the toolchain or the source does not match the kernel"
	jobs=${NVPM_JOBS:-$(nproc 2>/dev/null || echo 1)}
	say "modules_prepare with $jobs jobs (compiles the kernel crate)"
	# Progress: the Rust steps as they happen, with the elapsed time.
	{
		make "$@" -j"$jobs" modules_prepare </dev/null 2>&1
		echo $? >"$work/rc"
	} | tee "$work/build.log" | while IFS= read -r line; do
		case $line in
		*RUSTC*|*BINDGEN*|*EXPORTS*) echo "rust-headers:   [$(($(date +%s) - t0))s] $line" ;;
		esac
	done
	if [ "$(cat "$work/rc")" != 0 ]; then
		tail -n 40 "$work/build.log" >&2
		die "modules_prepare failed for $KREL"
	fi
	tmp=$store.tmp
	rm -rf "$tmp"
	mkdir -p "$tmp"
	overlay_files "$work/src" >"$tmp/.files"
	while IFS= read -r f; do
		[ -f "$work/src/$f" ] || die "modules_prepare did not produce $f"
		mkdir -p "$tmp/$(dirname "$f")"
		cp "$work/src/$f" "$tmp/$f"
	done <"$tmp/.files"
	printf '%s\n' "kernel: $KREL" "headers: $hdr_pkg=$hdr_ver" "source: $SOURCE $src_pkg=$src_ver" \
		"rustc: $RUSTC_WANT" "bindgen: $BINDGEN_WANT" "cc: $CC_WANT" >"$tmp/.key"
	touch "$tmp/.complete"
	rm -rf "$store"
	mv "$tmp" "$store"
	# Overlays of this kernel built for an older upload or toolchain.
	for old in "$CACHE/$KREL"/*/; do
		[ "${old%/}" = "$store" ] || rm -rf "$old"
	done
	rm -rf "$work"
	trap - EXIT INT TERM
	say "overlay for $KREL built in $(($(date +%s) - t0)) s, cached in $store"
fi

# --- copy it into the headers ----------------------------------------------
# In place only where every file is in the headers as in the overlay: the
# manifest outlives headers that were unpacked again, and scripts/ (with
# target.json) is shared by a kernel's flavours on Debian.
in_place() { # $1 = store, $2 = headers dir
	while IFS= read -r ip_f; do cmp -s "$1/$ip_f" "$2/$ip_f" || return 1; done <"$1/.files"
}
list=$CACHE/$KREL/installed
if [ -f "$list" ] && grep -qx "# key: $key" "$list" && in_place "$store" "$HDR"; then
	say "$HDR is Rust-capable (overlay $key in place)"
	exit 0
fi
remove_overlay "$KREL" >/dev/null
printf '# headers: %s\n# key: %s\n' "$HDR" "$key" >"$list.tmp"
while IFS= read -r f; do
	mkdir -p "$HDR/$(dirname "$f")"
	cp "$store/$f" "$HDR/$f"
	echo "$(cd "$(dirname "$HDR/$f")" && pwd -P)/$(basename "$f")" >>"$list.tmp"
done <"$store/.files"
mv "$list.tmp" "$list"
say "$HDR is Rust-capable ($(wc -l <"$store/.files") files from $store)"
