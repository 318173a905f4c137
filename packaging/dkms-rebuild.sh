#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# dkms-rebuild: rebuilds nvidia_peermem with DKMS, for each kernel DKMS has
# it for, when what its build reads from the GPU driver or the RDMA stack
# changed: nv-p2p.h and peer_mem.h under /usr/src, and the modules of that
# kernel that export the driver's and the RDMA core's symbols. The
# packages' triggers run it on NVIDIA driver and OFED upgrades (kernel
# upgrades are DKMS's own autoinstall). Installed as /usr/lib/nvidia-peer-memory/dkms-rebuild.
#
#   dkms-rebuild              rebuild where the inputs changed
#   dkms-rebuild --after-dkms MODULE
#                             the same, quietly, as DKMS's post_transaction
#                             command (/etc/dkms/framework.conf.d/nvidia-peer-memory.conf)
#   dkms-rebuild --force      rebuild for every kernel
#   dkms-rebuild --record     remember the current inputs, build nothing
#
# Never fails: the new build is tried in a scratch DKMS tree first; when it
# fails, that is reported (log in /var/lib/nvidia-peer-memory) and the
# installed module and DKMS's state stay as they were.
# Env (tests): NVPM_STATE, where the inputs are recorded; NVPM_SYSROOT
# prefixes /lib/modules and /usr/src (find-symvers.sh takes it too).
NAME=nvidia-peer-memory
STATE=${NVPM_STATE:-/var/lib/nvidia-peer-memory/inputs}
root=${NVPM_SYSROOT:-}
PATH=$PATH:/usr/sbin:/sbin
mode=${1:-changed}
# Our own DKMS calls end in DKMS's post_transaction command too: it does
# nothing inside a rebuild.
[ -z "${NVPM_IN_REBUILD:-}" ] || exit 0
export NVPM_IN_REBUILD=1
# As DKMS's post_transaction command (its $2 the module DKMS worked on)
# its output goes to DKMS's log, not to the admin: after another module's
# transaction it only rebuilds what now builds, and leaves every warning
# (and the record of a failure, which would silence it) to the trigger;
# after ours, our package's scripts do the rest.
after_dkms=
if [ "$mode" = --after-dkms ]; then
	[ "${2:-}" != "$NAME" ] || exit 0
	mode=changed after_dkms=1
fi

say() { echo "nvidia-peer-memory: $*"; }

inputs() { # $1 = kernel, $2 = our version
	arch=$(uname -m)
	for f in "$root"/usr/src/nvidia-*/nvidia/nv-p2p.h "$root"/usr/src/nvidia-*/nvidia-peermem/nv-p2p.h \
		"$root"/usr/src/ofa_kernel/"$arch"/"$1"/include/rdma/peer_mem.h "$root"/usr/src/ofa_kernel/"$1"/include/rdma/peer_mem.h \
		"$root"/usr/src/ofa_kernel/default/include/rdma/peer_mem.h; do
		[ -f "$f" ] && sha256sum "$f"
	done
	# The driver and RDMA core modules the build takes the CRCs from, as
	# modprobe finds them for that kernel (whatever installed them).
	sh "$root/usr/src/$NAME-$2/scripts/find-symvers.sh" --sources "$1" 2>/dev/null | while read -r f; do sha256sum "$f"; done
}

command -v dkms >/dev/null 2>&1 || exit 0
mkdir -p "$STATE"
# "nvidia-peer-memory/1.0.0, 7.3.4+deb13-amd64, x86_64: installed"
dkms status -m "$NAME" 2>/dev/null | sed -n 's|^[^/]*/\([^,]*\), \([^,]*\), [^:]*: installed.*|\1 \2|p' |
	while read -r ver kernel; do
		now=$(inputs "$kernel" "$ver" | sha256sum | cut -c1-64)
		was=$(cat "$STATE/$kernel" 2>/dev/null)
		case $mode in
		--record) echo "$now" >"$STATE/$kernel"; continue ;;
		--force) ;;
		*)
			# No record: DKMS built it with what is there now (a new kernel).
			[ -n "$was" ] || { echo "$now" >"$STATE/$kernel"; continue; }
			[ "$now" != "$was" ] || continue
			# Failed with exactly these inputs already: wait for them to change.
			[ "$now" != "$(cat "$STATE/$kernel.failed" 2>/dev/null)" ] || continue
			;;
		esac
		# On a CONFIG_MODVERSIONS kernel, the modules it imports from may be
		# gone (OFED or the driver removed): no build can carry their CRCs
		# (dkms.conf skips it). The module stays, as built against them.
		fs=$root/usr/src/$NAME-$ver/scripts/find-symvers.sh
		if grep -qx 'CONFIG_MODVERSIONS=y' "$root/lib/modules/$kernel/build/.config" 2>/dev/null &&
			! why=$(sh "$fs" --sources "$kernel" 2>&1 >/dev/null); then
			[ -z "$after_dkms" ] || continue
			echo "$now" >"$STATE/$kernel.failed"
			# Or not gone, still to come: in a driver upgrade dpkg runs this
			# trigger after the driver package's unpack and before its
			# postinst, which has DKMS build the new driver. Its DKMS module
			# is there (its source in /usr/src, or registered), its build
			# for this kernel not yet.
			if pending=$(sh "$fs" --driver-pending "$kernel" 2>/dev/null); then
				say "not rebuilt for $kernel yet: the NVIDIA driver's DKMS module $pending is present but not built for $kernel yet" >&2
				say "the installed module stays as it was built until $pending is built for $kernel (by its package's configuration, or \`dkms autoinstall -k $kernel\`); then it is rebuilt against it: DKMS 3.2.2 and later run /usr/lib/nvidia-peer-memory/dkms-rebuild as their post_transaction command; with older DKMS, run /usr/lib/nvidia-peer-memory/dkms-rebuild afterwards" >&2
				continue
			fi
			say "warning: not rebuilt for $kernel: ${why#find-symvers: }" >&2
			say "the installed module stays as it was built; it loads again once those modules are back" >&2
			continue
		fi
		say "rebuilding $NAME $ver for $kernel (the GPU driver or RDMA stack changed)"
		# `dkms build --force` drops the old build before it knows the new one
		# works, so try it in a scratch tree first.
		trial=$(mktemp -d "${TMPDIR:-/tmp}/nvpm-rebuild.XXXXXX")
		if dkms add -m "$NAME" -v "$ver" --dkmstree "$trial" --sourcetree /usr/src >/dev/null 2>&1 &&
			dkms build -m "$NAME" -v "$ver" -k "$kernel" --dkmstree "$trial" --sourcetree /usr/src >"$trial.out" 2>&1; then
			if dkms build -m "$NAME" -v "$ver" -k "$kernel" --force && dkms install -m "$NAME" -v "$ver" -k "$kernel" --force; then
				echo "$now" >"$STATE/$kernel"
				rm -f "$STATE/$kernel.failed"
			else
				say "warning: the rebuild for $kernel failed after a good trial build; see dkms status" >&2
			fi
		else
			log=${STATE%/*}/rebuild-$kernel.log
			cat "$trial.out" "$trial/$NAME/$ver/build/make.log" >"$log" 2>/dev/null
			[ -n "$after_dkms" ] || echo "$now" >"$STATE/$kernel.failed"
			say "warning: nvidia_peermem does not build for $kernel with the new GPU driver or RDMA stack;" \
				"the installed module stays as it was (log: $log)" >&2
		fi
		rm -rf "$trial" "$trial.out"
	done

# Kernels DKMS skipped because the modules the build imports from were not
# installed for them yet (a CONFIG_MODVERSIONS kernel, dkms.conf): build
# them once they are (the driver's or OFED's package arrived after ours).
[ "$mode" = --record ] && exit 0
dkms status -m "$NAME" 2>/dev/null | sed -n 's|^[^/]*/\([^,:]*\).*|\1|p' | sort -u |
	while read -r ver; do
		for cfg in "$root"/lib/modules/*/build/.config; do
			kernel=${cfg#"$root"/lib/modules/}
			kernel=${kernel%%/*}
			grep -qx 'CONFIG_MODVERSIONS=y' "$cfg" 2>/dev/null || continue
			dkms status -m "$NAME" -v "$ver" -k "$kernel" 2>/dev/null | grep -q ': installed' && continue
			sh "$root/usr/src/$NAME-$ver/scripts/find-symvers.sh" --sources "$kernel" >/dev/null 2>&1 || continue
			say "building $NAME $ver for $kernel (the modules it imports from are installed now)"
			if dkms install -m "$NAME" -v "$ver" -k "$kernel" >"${STATE%/*}/build-$kernel.log" 2>&1; then
				inputs "$kernel" "$ver" | sha256sum | cut -c1-64 >"$STATE/$kernel"
			else
				say "warning: nvidia_peermem does not build for $kernel (log: ${STATE%/*}/build-$kernel.log)" >&2
			fi
		done
	done
exit 0
