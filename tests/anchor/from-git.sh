#!/usr/bin/env bash
# Imports NVIDIA's nvidia-peermem from a clone of NVIDIA's
# open-gpu-kernel-modules into the anchor's cache, for a release that
# Debian does not package yet (make check-anchor ANCHOR_GIT=DIR;
# tests/anchor/README.md). Runs on the host, outside the root; fetches nothing.
#
# Usage: tests/anchor/from-git.sh GIT_DIR [REV]   (REV default HEAD)
# Takes from REV the files tests/anchor/build.sh keeps of Debian's package
# (kernel-open/: nvidia-peermem/, conftest.sh, common/inc/conftest.h and the
# version string of its Kbuild) into the root's /var/cache/nvpm-anchor/KEY/src,
# KEY = git-VERSION-COMMIT (12 hex digits), with an "origin" file naming the
# commit, and prints KEY (build.sh's ANCHOR_VERSION). Never into the repository.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
git_dir=${1:?usage: $0 GIT_DIR [REV]}
rev=${2:-HEAD}
commit=$(git -C "$git_dir" rev-parse --verify "$rev^{commit}") || die "$git_dir: no commit $rev"
top=kernel-open
nvver=$(git -C "$git_dir" show "$commit:$top/Kbuild" | sed -n 's/.*-DNV_VERSION_STRING=\\"\([^\\]*\)\\".*/\1/p')
[ -n "$nvver" ] || die "$git_dir $rev: no NV_VERSION_STRING in $top/Kbuild"
key=git-$nvver-${commit:0:12}
SRC=$CHROOT/var/cache/nvpm-anchor/$key/src
if [ ! -e "$SRC/.complete" ]; then
	rm -rf "$SRC" && mkdir -p "$SRC/common/inc"
	git -C "$git_dir" archive --format=tar "$commit" "$top/nvidia-peermem" "$top/conftest.sh" "$top/common/inc/conftest.h" |
		tar -x -C "$SRC" --strip-components=1
	[ -s "$SRC/nvidia-peermem/nvidia-peermem.c" ] || die "$git_dir $rev: no $top/nvidia-peermem/nvidia-peermem.c"
	echo "$nvver" >"$SRC/version"
	echo "NVIDIA/open-gpu-kernel-modules $nvver, commit ${commit:0:12}" >"$SRC/origin"
	touch "$SRC/.complete"
fi
log "anchor: nvidia-peermem $nvver from $git_dir ($commit) in the cache as $key"
echo "$key"
