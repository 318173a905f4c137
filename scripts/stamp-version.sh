#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# stamp-version.sh: VERSION is the one source of the version. This writes it
# into dkms.conf (PACKAGE_VERSION), rpm/nvidia_peer_memory.spec (Version:,
# and a %changelog entry) and debian/changelog (a new entry), which must
# carry it literally for dkms, rpmbuild and dpkg.
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

if [ "${1:-}" = --check ]; then
	bad=0
	for what in "dkms.conf PACKAGE_VERSION:$(dkms_v)" "$SPEC Version:$(spec_v)" \
		"$SPEC %changelog:$(spec_log_v)" "debian/changelog:$(deb_v)"; do
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
