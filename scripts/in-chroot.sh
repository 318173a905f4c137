#!/usr/bin/env bash
# Runs a command inside the provisioned trixie root with the repository at
# /src and the variables of kernel.env exported. Used by the Makefile.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
[ -r "$NVPM_CACHE/kernel.env" ] || die "not provisioned yet: run make"
# shellcheck source=/dev/null
. "$NVPM_CACHE/kernel.env"
enter_private_namespace "$@"
chroot_mount "$PWD"
# The guest runner's and the test suites' knobs cross over (tests/README.md).
knobs=()
while IFS= read -r v; do knobs+=("$v=${!v}"); done < <(compgen -e | grep -E '^(GUEST|STRESS)_' || true)
in_chroot KREL="$KREL" KDIR="$KDIR_CHROOT" KMAKE_FLAGS="$KMAKE_FLAGS" DEBIAN_MODULES="${DEBIAN_MODULES#"$CHROOT"}" \
	VMLINUZ="${VMLINUZ#"$CHROOT"}" CI="${CI:-}" "${knobs[@]}" sh -c 'cd /src && exec "$@"' sh "$@"
