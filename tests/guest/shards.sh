#!/usr/bin/env bash
# Spreads scenarios over guests booted side by side (tests/guest/run.sh,
# GUEST_SHARDS): heaviest first onto the guest with the least so far, by the
# weights file's "<glob> <seconds>" lines (the first match counts; 10 s
# without one). Prints "K scenario" lines, K from 1; every scenario once.
#   tests/guest/shards.sh GUESTS WEIGHTS SCENARIO...
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 GUESTS WEIGHTS SCENARIO..." >&2; exit 2; }
guests=$1 weights=$2
shift 2
[[ $guests =~ ^[1-9][0-9]*$ ]] || { echo "guest: GUEST_SHARDS=$guests: not a number of guests" >&2; exit 1; }
[ -r "$weights" ] || { echo "guest: GUEST_WEIGHTS=$weights: no such file" >&2; exit 1; }
globs=() secs=()
while read -r glob sec rest; do
	case $glob in '' | '#'*) continue ;; esac
	[[ $sec =~ ^[0-9]+$ ]] && [ -z "$rest" ] ||
		{ echo "guest: $weights: \"$glob $sec${rest:+ $rest}\": not \"<glob> <seconds>\"" >&2; exit 1; }
	globs+=("$glob") secs+=("$sec")
done <"$weights"
weight() { # $1 = scenario
	local i
	for i in "${!globs[@]}"; do
		# shellcheck disable=SC2053 # the glob matches
		[[ $1 == ${globs[i]} ]] && { echo "${secs[i]}"; return; }
	done
	echo 10
}
load=()
for ((k = 1; k <= guests; k++)); do load[k]=0; done
for n in "$@"; do echo "$(weight "$n") $n"; done | sort -k1,1nr -k2,2 | {
	while read -r sec name; do
		best=1
		for ((k = 2; k <= guests; k++)); do [ "${load[k]}" -ge "${load[best]}" ] || best=$k; done
		load[best]=$((load[best] + sec))
		echo "$best $name"
	done
}
