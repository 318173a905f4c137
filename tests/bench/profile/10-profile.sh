# `make bench-profile` (tests/bench/README.md, "Where the instructions go"), run
# in the guest: one boot per step, counted by the QEMU plugin tbcount.so.
#
# /tests/profile.env: PROFILE_STEP is "ksyms" (print the kernel's text
# symbols and stop), "base" (the stack and the warm-up only) or a client
# (bare_p, bare_r, nv_mem_nc, nv_mem: the same, then PROFILE_COUNT
# registrations of PROFILE_SIZE bytes of a PROFILE_LAYOUT buffer, the GPU
# simulator's cost_us at PROFILE_COST). Every step but ksyms prints the
# modules' symbols. Symbols go to the results port as "KSYM ADDR TYPE NAME
# [MODULE]".
# shellcheck shell=sh
. /tests/lib.sh
. /tests/client-lib.sh
# shellcheck source=/dev/null
. /tests/profile.env

symbols() {
	awk -v want="$1" '$2 ~ /^[tT]$/ && (want == "kernel") == (NF == 3) {
		print "KSYM", $1, $2, $3, $4 }' /proc/kallsyms >>"${NVPM_RESULTS:-/dev/null}"
}

if [ "$PROFILE_STEP" = ksyms ]; then
	symbols kernel
	pass ksyms
	exit 0
fi
load_stack profile "mode=modern" "" "persistent_api_support=0" || exit 1
va=$(nvpm-tool gpu alloc "$PROFILE_SIZE" --layout "$PROFILE_LAYOUT") || {
	fail alloc "$va"
	exit 1
}
nvpm-tool gpu set cost_us "$PROFILE_COST"
# loop CLIENT COUNT
loop() {
	reg_as "$1" "$va" "$PROFILE_SIZE" --count "$2" --nocheck --drain >/dev/null
}
# The same warm-up in every step: the first loops after boot run slow.
for c in bare_p bare_r nv_mem_nc nv_mem; do
	loop "$c" 200 || fail "warm-up/$c" "loop failed"
done
if [ "$PROFILE_STEP" != base ]; then
	loop "$PROFILE_STEP" "$PROFILE_COUNT" || fail "loop" "$PROFILE_STEP loop failed"
fi
symbols modules
nvpm-tool gpu set cost_us 0
nvpm-tool gpu free "$va" >/dev/null
unload_stack profile
