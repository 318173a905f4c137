#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# conftest.sh: which kernel APIs the carried crates need does this kernel
# have, by compiling a small test of each against its headers, for carried
# mode (kbuild/carried.mk runs it with the compiler and flags Kbuild gives C
# code, and writes build/carried/conftest.h).
#
# Usage: conftest.sh OUT DEPFILE SYMVERS CC [FLAG...]
#
# OUT gets one line per API, in a fixed order: `#define NVPM_HAVE_<API> 1`
# where the test compiles, `#undef NVPM_HAVE_<API>` where it does not;
# kbuild/carried/compat.h (and helpers.c, carried.mk) supply the API where it
# is missing. DEPFILE gets the headers the tests read (make's syntax, for
# fixdep), so the result is cached until those or the flags change. SYMVERS
# is the kernel's Module.symvers (its exports). Nothing is printed unless
# the compiler cannot build against the headers at all: then that is said,
# with its output, and the exit status is 1.
#
# Why not LINUX_VERSION_CODE: distributions' kernels (RHEL's, Ubuntu's)
# backport APIs without changing the version, so a 5.14 RHEL kernel can have
# what upstream added in 6.x; a version check then supplies an API the
# kernel already has, or misses one it lacks. NVIDIA's driver decides its
# kernel interfaces the same way, for the same reason (conftest.sh in
# open-gpu-kernel-modules' kernel-open/).
#
# Each test uses the API as the carried code does, so a kernel that has it
# under another signature is "without" (and gets the shim, which is valid
# where the kernel's own exists). A test that fails for any other reason
# does the same: every shim is a complete stand-in, so a wrong "without" is
# safe, a wrong "with" is not.
set -eu

[ $# -ge 4 ] || { echo "usage: conftest.sh OUT DEPFILE SYMVERS CC [FLAG...]" >&2; exit 2; }
out=$1 depfile=$2 symvers=$3
shift 3
tmp=$(dirname "$out")/.conftest.tmp
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

# compile CC [FLAG...]: compiles $tmp/$name.c with the kernel's flags, its
# output in $tmp/$name.log, the headers it read in $tmp/$name.d. Warnings
# are not errors here (a kernel built with CONFIG_WERROR would fail a test
# on one), except those that mean the API is missing or differs.
compile() {
	"$@" -DMODULE -Wno-error -Werror=implicit-function-declaration \
		-Werror=incompatible-pointer-types -Werror=int-conversion \
		-MD -MF "$tmp/$name.d" -c -o "$tmp/$name.o" "$tmp/$name.c" >"$tmp/$name.log" 2>&1
}

# exported SYMBOL: the kernel exports SYMBOL to modules (its Module.symvers:
# CRC, symbol, module, export type). Read as NVIDIA's conftest.sh reads it
# (export_symbol_present_conftest): an export is invisible to a compile
# test. Without a Module.symvers, nothing is taken as exported.
exported() {
	awk -F '\t' -v sym="$1" '$2 == sym && $4 ~ /^EXPORT_SYMBOL/ { found = 1 }
		END { exit !found }' "$symvers" 2>/dev/null
}

# conftest API SYMBOL CC [FLAG...]: the test program of API on stdin, which
# must compile; and SYMBOL, unless it is "-", must be exported.
conftest() {
	name=$1 sym=$2
	shift 2
	cat >"$tmp/$name.c"
	if compile "$@" && { [ "$sym" = - ] || exported "$sym"; }; then
		echo "#define NVPM_HAVE_$name 1" >>"$tmp/out"
	else
		echo "#undef NVPM_HAVE_$name" >>"$tmp/out"
	fi
}

# The headers the tests include, alone: if this does not compile, no test
# can say anything, and the compiler or its flags are at fault.
name=baseline
cat >"$tmp/$name.c" <<'EOF'
#include <linux/kernel.h>
#include <linux/atomic.h>
#include <linux/highmem.h>
EOF
if ! compile "$@"; then
	echo "conftest.sh: the compiler cannot build against this kernel's headers" \
		"(nothing can be tested): $*" | cut -c 1-400 >&2
	head -n 20 "$tmp/$name.log" >&2
	exit 1
fi
: >"$tmp/out"

# NVPM_HAVE_ATOMIC_ADD_NEGATIVE_ORDERED: atomic_add_negative_acquire,
# _release and _relaxed, and their atomic64_ forms, returning whether the
# result is negative (include/linux/atomic/atomic-instrumented.h). Upstream
# in 6.4: commit e5ab9eff46b0 ("atomics: Provide atomic_add_negative()
# variants"). Without: the fully ordered atomic_add_negative stands for each
# (compat.h).
conftest ATOMIC_ADD_NEGATIVE_ORDERED - "$@" <<'EOF'
#include <linux/atomic.h>
bool nvpm_conftest(atomic_t *v, atomic64_t *v64);
bool nvpm_conftest(atomic_t *v, atomic64_t *v64)
{
	return atomic_add_negative_acquire(1, v) | atomic_add_negative_release(1, v) |
	       atomic_add_negative_relaxed(1, v) | atomic64_add_negative_acquire(1, v64) |
	       atomic64_add_negative_release(1, v64) | atomic64_add_negative_relaxed(1, v64);
}
EOF

# NVPM_HAVE_KMAP_LOCAL_PAGE: kmap_local_page() and kunmap_local(), the
# page's mapping for this thread (include/linux/highmem-internal.h).
# Upstream in 5.11: commit f3ba3c710ac5 ("mm/highmem: Provide kmap_local*").
# Without: kmap_atomic() and kunmap_atomic() (compat.h).
conftest KMAP_LOCAL_PAGE - "$@" <<'EOF'
#include <linux/highmem.h>
void nvpm_conftest(struct page *page);
void nvpm_conftest(struct page *page)
{
	void *addr = kmap_local_page(page);

	kunmap_local(addr);
}
EOF

# NVPM_HAVE__PRINTK: _printk(), the function behind the printk() macro
# (include/linux/printk.h), which the kernel crate calls. Upstream in 5.15:
# commit 337015573718 ("printk: Userspace format indexing support"), which
# renamed printk(). Without: compat.h declares it for the bindings, and the
# carried objects' calls go to nvpm_carried_printk (carried.mk) either way.
conftest _PRINTK - "$@" <<'EOF'
#include <linux/kernel.h>
#include <linux/printk.h>
int (*nvpm_conftest)(const char *fmt, ...) = _printk;
EOF

# NVPM_HAVE_ERRNAME: errname(), an errno's name (include/linux/errname.h,
# lib/errname.c), declared and exported to modules. Exported upstream in
# 6.7: commit 21db931445d8 ("lib: Export errname"). Without (or where
# CONFIG_SYMBOLIC_ERRNAME is off, and the kernel's is an inline that
# returns NULL): nvpm_carried_errname (helpers.c), which also returns NULL,
# and the error is printed as a number.
conftest ERRNAME errname "$@" <<'EOF'
#include <linux/errname.h>
const char *(*nvpm_conftest)(int err) = errname;
EOF

# The headers the tests read, for make: every test's, less the tests
# themselves (gcc's dependency lines: "target: file file \").
{
	printf '%s:' "$out"
	cat "$tmp"/*.d | sed 's/^[^:]*://' | awk -v tmp="$tmp/" '{
		for (i = 1; i <= NF; i++)
			if ($i != "\\" && index($i, tmp) != 1)
				print " " $i
	}' | LC_ALL=C sort -u | tr -d '\n'
	echo
} >"$depfile"
mv "$tmp/out" "$out"
