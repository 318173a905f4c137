#!/usr/bin/env bash
# Runs a command inside the provisioned trixie root with the repository at
# /src and the variables of kernel.env (or $NVPM_KERNEL_ENV) exported. Used
# by the Makefile.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# NVPM_KERNEL_ENV: another kernel's env file in the cache (kernel-7.2.env,
# written by KSERIES=7.2 scripts/provision.sh; kernel-7.3-arm64.env by
# KARCH=arm64 scripts/provision.sh).
kenv=$NVPM_CACHE/${NVPM_KERNEL_ENV:-kernel.env}
[ -r "$kenv" ] || die "not provisioned yet: run make (or KSERIES=... scripts/provision.sh for $kenv)"
# shellcheck source=/dev/null
. "$kenv"
enter_private_namespace "$@"
chroot_mount "$PWD"
# The guest runner's and the test suites' knobs cross over (tests/guest/README.md,
# tests/stress/README.md).
knobs=()
while IFS= read -r v; do knobs+=("$v=${!v}"); done < <(compgen -e | grep -E '^(GUEST|STRESS)_' || true)
in_chroot KREL="$KREL" KDIR="$KDIR_CHROOT" KMAKE_FLAGS="$KMAKE_FLAGS" DEBIAN_MODULES="${DEBIAN_MODULES#"$CHROOT"}" \
	VMLINUZ="${VMLINUZ#"$CHROOT"}" GUEST_USERLAND="${GUEST_USERLAND:+${GUEST_USERLAND#"$CHROOT"}}" CI="${CI:-}" \
	"${knobs[@]}" sh -c 'cd /src && exec "$@"' sh "$@"
