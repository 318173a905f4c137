#!/usr/bin/env bash
# Prints the lines of a guest's serial log that fail the run
# (tests/guest/run.sh, guest/dmesg-clean): WARNING, BUG, Oops, KASAN,
# "Unknown symbol", lockdep's INFO reports and the like.
#
#   tests/guest/log-scan.sh SERIAL-LOG RESULTS-LOG
#
# Not counted:
# - the console's copies of the scenarios' result lines (NVPM-RESULT, which
#   may quote a log line): only a line equal to one on the results port,
#   so a kernel message that cut into the copy is still seen;
# - a KASAN report whose first line the guest listed on the results port as
#   NVPM-KASAN-EXPECTED LINE (tests/guest/lib.sh: an anchor bug that
#   tests/anchor/anchor-expected lists, shown by that report where it is
#   expected); the same line in the dmesg dump too;
# - a CONFIG_MODVERSIONS kernel's refusal of a CRC: check_version()
#   (kernel/module/version.c) logs "M: disagrees about version of symbol
#   S", resolve_symbol() then fails it with -EINVAL and simplify_symbols()
#   (kernel/module/main.c) logs "M: Unknown symbol S (err -22)". That second
#   line is no missing symbol; 02-modversions provokes and checks it.
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 SERIAL-LOG RESULTS-LOG" >&2; exit 2; }
results=$2
[ -r "$results" ] || results=/dev/null
awk -v results="$results" '
	BEGIN {
		while ((getline r < results) > 0) {
			if (r ~ /^NVPM-KASAN-EXPECTED /) {
				sub(/^NVPM-KASAN-EXPECTED /, "", r)
				if (r ~ /BUG: KASAN: /)
					expected[r] = 1
			} else if (r ~ /^NVPM-RESULT /) {
				ours[r] = 1
			}
		}
	}
	$0 in ours { next }
	$0 in expected { next }
	{ line = $0; sub(/^\[[ 0-9.]*\] /, "", line) }
	line ~ /: Unknown symbol [A-Za-z0-9_]+ \(err -22\)$/ {
		split(line, w, /: Unknown symbol | \(err/)
		if (prev == w[1] ": disagrees about version of symbol " w[2]) { prev = line; next }
	}
	{ prev = line; print }' "$1" |
	grep -E 'WARNING:|BUG:|Oops|KASAN|Unknown symbol|general protection|kernel BUG|UBSAN|possible circular locking|kmemleak:.*new suspected|INFO: (trying to register non-static key|lockdep is turned off|task .* blocked)' || true
