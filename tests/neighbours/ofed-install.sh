#!/bin/sh
# ofed-install.sh DIR MODULES CONFIGURE: inside a test root, MOFED's
# mlnx-ofed-kernel-dkms built from its source in DIR (its debian/
# packaging) and installed with dpkg, as an admin does; dpkg's postinst has
# DKMS build it for the root's kernels. The one change to MOFED's source:
# dkms.conf's module list (MODULES) and its configure options (CONFIGURE),
# which is how MOFED's own tooling restricts a build (ofed_scripts/dkms_ofed
# get-config); DKMS's /etc/dkms/<module>.conf cannot shorten the list (DKMS
# merges its arrays index by index). 25.10 has dkms.conf in its tree, 25.07
# generates it at package build time: each is restricted where it is made. mlnx-ofed-kernel-utils depends on
# mlnx-tools (MOFED's userspace tools, in no Debian archive): skipped with
# --ignore-depends; the build needs nothing of it.
set -e
dir=$1 modules=$2 configure=$3
# What mlnx-ofed-kernel-utils depends on, from the archive where missing (an
# upgrade: apt refuses anything while the installed utils lacks mlnx-tools).
need=
for p in lsof pciutils procps; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
# shellcheck disable=SC2086 # a list of words
[ -z "$need" ] || apt-get install -y -q --no-install-recommends $need
cd "$dir"/mlnx-ofa_kernel-*
if [ -f dkms.conf ]; then
	# 25.10: a dkms.conf in the tree (its module list, PRE_BUILD's configure).
	sed -i "s|^PRE_BUILD=.*|PRE_BUILD='./configure --kernel-sources=\$kernel_source_dir $configure --with-njobs=\$parallel_jobs'|" dkms.conf
	awk -v mods="$modules" '
		/^mlnx_ofed_modules="/ { print; n = split(mods, m, " "); for (i = 1; i <= n; i++) print m[i]; skip = 1; next }
		skip && /^"/ { skip = 0 }
		!skip' dkms.conf >dkms.conf.new
	mv dkms.conf.new dkms.conf
	grep -A4 '^mlnx_ofed_modules=' dkms.conf
	grep '^PRE_BUILD=' dkms.conf
else
	# 25.07: debian/rules generates dkms.conf (ofed_scripts/generate_dkms_conf.sh)
	# from $configure_options, and DKMS's build configures with the options
	# its module list implies (pre_build.sh, dkms_ofed get-config). The list
	# also names what the kernel's configuration enables (irdma,
	# mlx5-vfio-pci, ...), which a core-only configure does not build: the
	# generated file ends by setting the arrays to MODULES.
	export configure_options="$configure"
	names='' locs='' dests=''
	for m in $modules; do
		names="$names ${m##*/}" locs="$locs ${m%/*}" dests="$dests /kernel/${m%/*}"
	done
	printf '%s\n' "echo 'BUILT_MODULE_NAME=($names )'" "echo 'DEST_MODULE_NAME=($names )'" \
		"echo 'BUILT_MODULE_LOCATION=($locs )'" "echo 'DEST_MODULE_LOCATION=($dests )'" >>ofed_scripts/generate_dkms_conf.sh
fi
dpkg-buildpackage -us -uc -b
cd ..
# Over an installed release dpkg asks about utils' conffiles that its
# postinst edits (openib.conf): keep them, as a non-interactive upgrade does.
dpkg -i --force-confdef --force-confold --ignore-depends=mlnx-tools mlnx-ofed-kernel-utils_*.deb mlnx-ofed-kernel-dkms_*.deb
rm -rf "$dir"
