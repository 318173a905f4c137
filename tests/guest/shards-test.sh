#!/usr/bin/env bash
# Checks of tests/guest/shards.sh (part of the host suite): how scenarios are
# spread over guests, and its refusals of bad input.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SUITE=shards SUMMARY=SHARDS
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh
# expect NAME WANT CMD...: CMD's output (stdout and stderr) and status must be WANT ("rc=N" last).
expect() {
	local name=$1 want=$2 got
	shift 2
	got=$("$@" 2>&1; echo "rc=$?")
	if [ "$got" = "$want" ]; then ok "$name"; else bad "$name" "got $(printf '%q' "$got"), want $(printf '%q' "$want")"; fi
}
printf '# comment\n\na* 9\nb* 5\nc* 4\nd* 3\n' >"$tmp/w"
# Heaviest first onto the lightest guest (ties: the lower number); e1 has no
# line: 10 s.
expect balanced "$(printf '1 e1\n2 a1\n2 b1\n1 c1\n1 d1\nrc=0')" tests/guest/shards.sh 2 "$tmp/w" a1 b1 c1 d1 e1
expect three-guests "$(printf '1 e1\n2 a1\n3 b1\n3 c1\n2 d1\nrc=0')" tests/guest/shards.sh 3 "$tmp/w" a1 b1 c1 d1 e1
expect one-guest "$(printf '1 a1\n1 b1\nrc=0')" tests/guest/shards.sh 1 "$tmp/w" b1 a1
printf 'a1 1\na* 50\n' >"$tmp/first"
expect first-match "$(printf '1 a2\n2 a1\nrc=0')" tests/guest/shards.sh 2 "$tmp/first" a1 a2
# Bad input: a clear error, nothing printed on stdout.
expect bad-guests "$(printf 'guest: GUEST_SHARDS=x: not a number of guests\nrc=1')" tests/guest/shards.sh x "$tmp/w" a1
expect zero-guests "$(printf 'guest: GUEST_SHARDS=0: not a number of guests\nrc=1')" tests/guest/shards.sh 0 "$tmp/w" a1
expect no-weights "$(printf 'guest: GUEST_WEIGHTS=%s: no such file\nrc=1' "$tmp/none")" tests/guest/shards.sh 2 "$tmp/none" a1
printf 'a* ten\n' >"$tmp/word"
expect bad-seconds "$(printf 'guest: %s: "a* ten": not "<glob> <seconds>"\nrc=1' "$tmp/word")" tests/guest/shards.sh 2 "$tmp/word" a1
printf 'a* 1 2\n' >"$tmp/extra"
expect extra-field "$(printf 'guest: %s: "a* 1 2": not "<glob> <seconds>"\nrc=1' "$tmp/extra")" tests/guest/shards.sh 2 "$tmp/extra" a1
# The committed weights have a line for every scenario: a new one without
# its measured time would be spread as 10 s.
missing=
for s in tests/guest/scenarios/[0-9]*.sh; do
	n=$(basename "$s" .sh)
	grep -qE "^${n%%-*}-\* [0-9]+$" tests/guest/weights || missing+=" $n"
done
if [ -z "$missing" ]; then ok weights-cover-scenarios; else bad weights-cover-scenarios "no weight for$missing"; fi
finish
[ "$fail" = 0 ]
