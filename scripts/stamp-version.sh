#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# stamp-version.sh: VERSION is the one source of the version. This writes it
# into dkms.conf (PACKAGE_VERSION), rpm/nvidia_peer_memory.spec (Version:,
# and a %changelog entry), debian/changelog (a new entry) and the doctor's
# src/doctor/Cargo.toml and its Cargo.lock entry (what `nvidia-peermem-doctor
# --version` prints), which must carry it literally for dkms, rpmbuild, dpkg
# and cargo.
#   scripts/stamp-version.sh           stamp
#   scripts/stamp-version.sh --check   exit 1 and list what differs
# (tests/packaging runs --check; the module reads VERSION at build time.)
set -eu
cd "$(dirname "$0")/.."
V=$(cat VERSION)
SPEC=rpm/nvidia_peer_memory.spec

dkms_v() { sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' dkms.conf; }
spec_v() { sed -n 's/^Version:[[:space:]]*//p' "$SPEC"; }
spec_log_v() { sed -n '/^%changelog/,$ s/^\* .* - \([^-]*\)-[^-]*$/\1/p' "$SPEC" | head -n1; }
deb_v() { sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' debian/changelog | sed 's/-[^-]*$//'; }
DOCTOR=src/doctor/Cargo.toml
doctor_v() { sed -n '/^\[package\]/,/^\[/ s/^version = "\(.*\)"$/\1/p' "$DOCTOR" | head -n1; }
# The version line after the doctor's name in Cargo.lock.
lock_v() { awk '/^name = "nvidia-peermem-doctor"$/ {on=1; next} on && /^version = / {gsub(/"/, "", $3); print $3; exit}' Cargo.lock; }

if [ "${1:-}" = --check ]; then
	bad=0
	for what in "dkms.conf PACKAGE_VERSION:$(dkms_v)" "$SPEC Version:$(spec_v)" \
		"$SPEC %changelog:$(spec_log_v)" "debian/changelog:$(deb_v)" "$DOCTOR version:$(doctor_v)" \
		"Cargo.lock nvidia-peermem-doctor:$(lock_v)"; do
		if [ "${what##*:}" != "$V" ]; then
			echo "version mismatch: ${what%:*} has '${what##*:}', VERSION has '$V'"
			bad=1
		fi
	done
	[ $bad = 0 ] && echo "versions agree: $V"
	exit $bad
fi

sed -i "s/^PACKAGE_VERSION=\".*\"$/PACKAGE_VERSION=\"$V\"/" dkms.conf
sed -i "s/^Version:\([[:space:]]*\).*/Version:\1$V/" "$SPEC"
sed -i "/^\[package\]/,/^\[/ s/^version = \".*\"$/version = \"$V\"/" "$DOCTOR"
awk -v v="$V" '/^name = "nvidia-peermem-doctor"$/ {on=1} on && /^version = / {$0 = "version = \"" v "\""; on=0} {print}' \
	Cargo.lock >Cargo.lock.tmp && mv Cargo.lock.tmp Cargo.lock
who="nvidia-peermem-rs developers <nvidia-peermem-rs@users.noreply.invalid>"
if [ "$(spec_log_v)" != "$V" ]; then
	rel=$(sed -n 's/^Release:[[:space:]]*\([0-9]*\).*/\1/p' "$SPEC")
	entry="* $(LC_ALL=C date -u '+%a %b %d %Y') $who - $V-$rel
- Version $V.
"
	awk -v e="$entry" '{ print } /^%changelog$/ { printf "%s\n", e }' "$SPEC" >"$SPEC.tmp" && mv "$SPEC.tmp" "$SPEC"
fi
if [ "$(deb_v)" != "$V" ]; then
	{
		printf 'nvidia-peer-memory (%s-1) unstable; urgency=medium\n\n  * Version %s.\n\n -- %s  %s\n\n' \
			"$V" "$V" "$who" "$(LC_ALL=C date -u -R)"
		cat debian/changelog
	} >debian/changelog.tmp && mv debian/changelog.tmp debian/changelog
fi
exec "$0" --check
