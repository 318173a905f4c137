#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# ofed-rpm-names.sh SPEC: the names of MOFED's rpm packages that install
# its kernel modules, their sources or its DKMS tree, read from its
# mlnx-ofa_kernel.spec: each "%package" with the spec's own name macros
# expanded, and the KMP that %kernel_module_package makes (kmod-NAME on
# RHEL, NAME-kmp-default on SUSE). The main package (Name:, its
# utilities) has no %package line and is left out.
set -eu
spec=${1:?usage: ofed-rpm-names.sh SPEC}
awk '
	# %{!?_name: %global _name mlnx-ofa_kernel}
	/^%\{!\?_name: %global _name / { v = $NF; sub(/\}$/, "", v); macro["_name"] = v }
	/^%global [a-z_]*pname / { macro[$2] = $3 }
	function expand(s,   m) {
		while (match(s, /%\{[a-z_]+\}/)) {
			m = substr(s, RSTART + 2, RLENGTH - 3)
			if (!(m in macro)) { print "ofed-rpm-names: unknown macro " m > "/dev/stderr"; exit 1 }
			s = substr(s, 1, RSTART - 1) macro[m] substr(s, RSTART + RLENGTH)
		}
		return s
	}
	/^%package -n / { print expand($3); next }
	/^%package / { print expand("%{_name}-" $2); next }
	/^%kernel_module_package / { kmp = 1 }
	END {
		if (!("_name" in macro)) { print "ofed-rpm-names: no _name in the spec" > "/dev/stderr"; exit 1 }
		if (kmp) { print "kmod-" macro["_name"]; print macro["_name"] "-kmp-default" }
	}' "$spec" | sort -u
