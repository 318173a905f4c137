#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# negative.sh: check-ko.py catches each missing code-generation flag. Compiles
# tests/kocheck/probe.rs with the flags carried mode used for the last kernel
# it built (build/carried/rustflags, with its target.json), once as they are
# (every check passes) and once without each flag (that flag's check fails).
# x86-64: ibt, padding, rethunk, retpoline. arm64: pac, and bti against a
# copy of the config that asks for BTI (Debian's GCC-built kernels do not:
# GCC's BTI is off in their Kconfig).
# Usage: negative.sh KCONFIG    (inside the root, after a carried build)
set -u
cd "$(dirname "$0")/../.." || exit 1
SUITE=kocheck SUMMARY=KOCHECK
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh
conf=$1
cr=build/carried
out=build/kocheck
mkdir -p "$out"
arm64=$(grep -qs '^CONFIG_ARM64=y' "$conf" && echo y)
[ -s "$cr/rustflags" ] && { [ -n "$arm64" ] || [ -s "$cr/target.json" ]; } && [ -f "$cr/libcore.rmeta" ] || {
	bad negative/setup "no carried build in $cr"
	finish
}

# build NAME FLAG_TO_DROP [FLAG_TO_ADD]: the probe object, or nothing.
build() {
	flags="$(sed -e "s| $2 | |" "$cr/rustflags") ${3:-}"
	rm -f "$out/$1.o"
	# shellcheck disable=SC2086 # the flags are words
	RUSTC_BOOTSTRAP=1 rustc $flags --sysroot=/dev/null -Zunstable-options -L"$cr" \
		--extern core="$cr/libcore.rmeta" --edition=2021 --crate-type rlib --crate-name probe \
		--emit=obj="$out/$1.o" tests/kocheck/probe.rs
}

# expect NAME CHECK WANT [KCONFIG]: check-ko.py on the probe gives WANT
# (PASS or FAIL) for CHECK.
expect() {
	got=$(python3 tests/kocheck/check-ko.py --name probe "${4:-$conf}" "$out/$1.o" |
		sed -n "s#^\(PASS\|FAIL\|SKIP\) probe/$2\b.*#\1#p")
	if [ "$got" = "$3" ]; then
		ok "negative/$1/$2"
	else
		bad "negative/$1/$2" "check-ko.py said ${got:-nothing}, expected $3"
	fi
}

if [ -n "$arm64" ]; then
	# The branch protection carried mode chose for this kernel.
	bp=$(grep -o -- ' -Zbranch-protection=[a-z,-]* ' "$cr/rustflags" | tr -d ' ')
	if [ -z "$bp" ]; then
		bad negative/setup "$conf asks for no pointer authentication, nothing to test"
		finish
	fi
	bconf=$out/config-bti
	{ grep -v '^CONFIG_ARM64_BTI_KERNEL=' "$conf"; echo CONFIG_ARM64_BTI_KERNEL=y; } >"$bconf"
	build full "$bp" "-Zbranch-protection=bti,pac-ret"
	expect full pac PASS
	expect full bti PASS "$bconf"
	# Without branch protection nothing signs the return address, and no
	# function has a landing pad (paciasp is an implicit one).
	build no-branch-protection "$bp"
	expect no-branch-protection pac FAIL
	expect no-branch-protection bti FAIL "$bconf"
	finish
fi

pad=$(sed -n 's/^CONFIG_FUNCTION_PADDING_BYTES=//p' "$conf")
build full ""
for c in ibt padding rethunk retpoline; do expect full $c PASS; done
build no-ibt "-Zcf-protection=branch"
expect no-ibt ibt FAIL
build no-padding "-Zpatchable-function-entry=$pad,$pad"
expect no-padding padding FAIL
build no-rethunk "-Zfunction-return=thunk-extern"
expect no-rethunk rethunk FAIL
# Retpolines are target features of target.json, and another target.json is
# another target (core would not link): switched off on the command line.
build no-retpoline "" "-Ctarget-feature=-retpoline-external-thunk,-retpoline-indirect-branches,-retpoline-indirect-calls"
expect no-retpoline retpoline FAIL
finish
