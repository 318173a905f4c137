#!/usr/bin/env bash
# Host tests: the workspace's cargo tests (pure logic shared with the module).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(cargo test --workspace --color never 2>&1)
rc=$?
printf '%s\n' "$out" | grep -E '^test .* FAILED$|^error|panicked' || true
read -r pass fail < <(printf '%s\n' "$out" | awk '/^test result:/ {
	for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i }
} END { print p + 0, f + 0 }')
if [ $rc != 0 ] && [ "$fail" = 0 ]; then
	printf '%s\n' "$out" | tail -n 30
	fail=1
fi
echo "HOST-SUMMARY $pass passed, $fail failed"
[ "$fail" = 0 ]
