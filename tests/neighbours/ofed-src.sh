#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# ofed-src.sh RELEASE: the path of MOFED's kernel source tarball of RELEASE
# (25.07.0.9.7.1, 25.10.1.7.1.1), checked against the checksum pinned in
# tests/neighbours/ofed.sha256. MOFED's source is in no package registry
# these machines reach: it is taken from $NVPM_OFED_SRC (default: the
# shared folder beside the repository, ../shared/third-party). Exit 2 with
# one "SKIP <what>: ..." line naming what to download when it is absent;
# exit 1 when its checksum differs.
set -eu
release=${1:?usage: ofed-src.sh RELEASE}
here=$(cd "$(dirname "$0")" && pwd)
dir=${NVPM_OFED_SRC:-$here/../../../shared/third-party}
name=mlnx-ofa_kernel-$release.tar.gz
want=$(awk -v n="$name" '$2 == n { print $1 }' "$here/ofed.sha256")
[ -n "$want" ] || { echo "ofed-src: no pinned checksum for $name in tests/neighbours/ofed.sha256" >&2; exit 1; }
if [ ! -f "$dir/$name" ]; then
	echo "SKIP MOFED $release: no $dir/$name (DOCA-OFED's mlnx-ofa_kernel source, from its public mirror github knneth/mlnx-ofa_kernel, tag or commit of $release, as git archive --prefix=mlnx-ofa_kernel-$release/; set NVPM_OFED_SRC to its folder)"
	exit 2
fi
got=$(sha256sum "$dir/$name" | cut -c1-64)
[ "$got" = "$want" ] || { echo "ofed-src: $dir/$name has sha256 $got, pinned $want" >&2; exit 1; }
echo "$(cd "$dir" && pwd)/$name"
