#!/usr/bin/env bash
# real-tables.sh NAME MODULES SYMVERS: scripts/find-symvers.sh's reading of
# module files against a real kernel build's own Module.symvers: for each
# RDMA core module of MODULES (the kernel's /lib/modules/<release>, as its
# image package installs them: compressed or not), every CRC, symbol and
# export type the reader gets from the file must be the line the kernel's
# build wrote for that module (SYMVERS: its headers' Module.symvers), and
# none may be missing. One PASS or FAIL line per module, prefixed NAME.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
name=${1:?usage: real-tables.sh NAME MODULES SYMVERS} mods=${2:?} symvers=${3:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for f in "$mods"/kernel/drivers/infiniband/core/*.ko*; do
	[ -e "$f" ] || continue
	m=$(basename "$f" | sed 's/\.ko.*//')
	n=$((n + 1))
	sh scripts/find-symvers.sh --exports "$f" 2>"$tmp/err" | awk -F '\t' '{ print $1, $2, $4 }' | sort >"$tmp/ours"
	awk -F '\t' -v m="drivers/infiniband/core/$m" '$3 == m { print $1, $2, $4 }' "$symvers" | sort >"$tmp/theirs"
	if [ -s "$tmp/err" ]; then
		echo "FAIL $name/$m: $(cat "$tmp/err")"
	elif cmp -s "$tmp/ours" "$tmp/theirs"; then
		echo "PASS $name/$m ($(wc -l <"$tmp/ours") CRCs, as the kernel's Module.symvers has them)"
	else
		echo "FAIL $name/$m: $(diff "$tmp/ours" "$tmp/theirs" | grep -c '^[<>]') lines differ from $symvers: $(diff "$tmp/ours" "$tmp/theirs" | head -n 4 | tr '\n' ' ')"
	fi
done
[ "$n" -gt 0 ] || echo "FAIL $name: no RDMA core modules in $mods/kernel/drivers/infiniband/core"
