#!/usr/bin/env bash
# Builds the guest's tools, nvpm-tool (tests/tool) and nvidia-peermem-doctor,
# static, for the architecture of the provisioned kernel ($NVPM_KERNEL_ENV,
# default kernel.env; x86_64 without one), into
# target/<arch>-unknown-linux-gnu/release/ (tests/guest/run.sh takes them
# from there). x86_64: the host's cargo. Another architecture: Debian's cargo
# in the trixie root, its standard library for that target and the kernel's
# cross compiler as the linker (scripts/provision.sh installs them), offline,
# from the crates of Cargo.lock that the host's cargo vendors into
# build/tool-vendor (the root does not trust the host's certificates).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
kenv=$NVPM_CACHE/${NVPM_KERNEL_ENV:-kernel.env}
arch=x86_64 cc=
if [ -r "$kenv" ]; then
	# shellcheck source=/dev/null
	. "$kenv"
	config=$KDIR_HOST/.config
	[ -r "$config" ] || die "$config: no kernel configuration"
	if grep -q '^CONFIG_ARM64=y' "$config"; then arch=aarch64; fi
	cc=$(printf '%s\n' $KMAKE_FLAGS | sed -n 's/^CC=//p')
fi
triple=$arch-unknown-linux-gnu
if [ "$arch" = x86_64 ]; then
	exec env RUSTFLAGS='-C target-feature=+crt-static' cargo build --release -p nvpm-tool -p nvidia-peermem-doctor \
		--target "$triple"
fi
[ -n "$cc" ] || die "$kenv names no CC in KMAKE_FLAGS"
linker_var=CARGO_TARGET_$(echo "$triple" | tr 'a-z-' 'A-Z_')_LINKER
cargo vendor --locked --versioned-dirs -q build/tool-vendor >/dev/null
# shellcheck disable=SC2016 # expanded inside the root
exec scripts/in-chroot.sh env "$linker_var=$cc" RUSTFLAGS='-C target-feature=+crt-static' \
	sh -c 'cargo build --release --offline --locked -p nvpm-tool -p nvidia-peermem-doctor --target "$1" \
		--config "source.crates-io.replace-with=\"vendored\"" --config "source.vendored.directory=\"build/tool-vendor\""' \
		sh "$triple"
