#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# nv_peer_mem: loads and unloads nvidia_peermem, the GPUDirect RDMA
# peer-memory client. Installed as /usr/lib/nvidia-peer-memory/nv_peer_mem;
# both /etc/init.d/nv_peer_mem and nv_peer_mem.service run it.
#
#   nv_peer_mem start|stop|restart|force-reload|status|onboot
#   nv_peer_mem doctor [--json] [--verbose]
#
# Exit codes (LSB): 0 success / loaded; 1 generic failure (e.g. a required
# module is missing); 2 bad arguments; 3 status: not loaded; 5 the module
# is not installed for the running kernel; 6 the module that modprobe would
# load is not this package's (see NVIDIA's bundled nvidia-peermem, README).
# `onboot` exits 0 when ONBOOT=yes, 1 otherwise (systemd's ExecCondition);
# start, restart and force-reload do nothing (exit 0) unless ONBOOT=yes.
# `doctor` runs nvidia-peermem-doctor (same package) with the remaining
# arguments and exits with its status: 0 nothing blocks GPUDirect RDMA,
# 1 something does, 2 usage error; 5 when the doctor is not installed.
# (Debian's `service` takes --help and --version for itself.)
#
# Settings come from /etc/infiniband/nv_peer_mem.conf (or $CONFIG).
# modprobe, rmmod, modinfo and nvidia-peermem-doctor are called by name, from PATH.

MODULE=nvidia_peermem
CONFIG=${CONFIG:-/etc/infiniband/nv_peer_mem.conf}
ONBOOT=yes
# Modules that must be loaded before nvidia_peermem (the GPU driver and
# the RDMA core); modprobe.d has the same list as a softdep.
PREREQ_MODULES="ib_core nvidia"
if [ -r "$CONFIG" ]; then
	# shellcheck source=/dev/null
	. "$CONFIG"
fi

say() { echo "nv_peer_mem: $*"; }
warn() {
	echo "nv_peer_mem: $*" >&2
	if command -v logger >/dev/null 2>&1; then logger -t nv_peer_mem -- "$*" 2>/dev/null || :; fi
}
loaded() { [ -d "/sys/module/$1" ]; }

# The module modprobe would load must be this package's (nvidia_peermem.ko,
# from DKMS or the kmod package): NVIDIA's driver builds a module of the
# same name from nvidia-peermem.ko (Debian: nvidia-current-peermem.ko).
ours() {
	file=$(modinfo -F filename "$MODULE" 2>/dev/null) || return 1
	case ${file##*/} in nvidia_peermem.ko*) return 0 ;; *) return 1 ;; esac
}

do_start() {
	if loaded "$MODULE"; then
		say "$MODULE is already loaded"
		return 0
	fi
	if ! modinfo "$MODULE" >/dev/null 2>&1; then
		warn "$MODULE is not installed for kernel $(uname -r) (is nvidia-peer-memory-dkms built for it? see: dkms status)"
		return 5
	fi
	if ! ours; then
		warn "modprobe resolves $MODULE to $(modinfo -F filename "$MODULE" 2>/dev/null), which is not nvidia-peer-memory's module; remove NVIDIA's nvidia-peermem or see /usr/share/doc/nvidia-peer-memory"
		return 6
	fi
	for m in $PREREQ_MODULES; do
		loaded "$m" && continue
		if ! modprobe "$m" >/dev/null 2>&1 || ! loaded "$m"; then
			warn "required module $m is not loaded and cannot be loaded; $MODULE needs it (install the NVIDIA driver / the RDMA stack)"
			return 1
		fi
	done
	log_lines=$(dmesg 2>/dev/null | wc -l)
	if modprobe "$MODULE" && loaded "$MODULE"; then
		say "$MODULE loaded"
		return 0
	fi
	crc_refusal "$log_lines"
	warn "failed to load $MODULE (see dmesg; \`service nv_peer_mem doctor\` checks the whole stack)"
	return 1
}

# On a CONFIG_MODVERSIONS kernel a module built with the CRCs of another
# build of the GPU driver or of the RDMA core is refused ("disagrees about
# version of symbol"): says whose, which modules the build took the CRCs
# from (DKMS's make.log) and how to rebuild. $1: kernel log lines before the modprobe.
crc_refusal() {
	sym=$(dmesg 2>/dev/null | tail -n +$(($1 + 1)) |
		sed -n "s/.*$MODULE: disagrees about version of symbol \([A-Za-z0-9_]*\).*/\1/p" | head -n 1)
	[ -n "$sym" ] || return 0
	case $sym in
	nvidia_p2p_*) whose="the NVIDIA driver" ;;
	*peer_memory*) whose="the RDMA core (OFED)" ;;
	*) whose="the kernel" ;;
	esac
	version=$(modinfo -F version "$MODULE" 2>/dev/null)
	used=$(sed -n 's/^nvidia_peermem: CONFIG_MODVERSIONS=y: CRCs from //p' \
		/var/lib/dkms/nvidia-peer-memory/"$version"/"$(uname -r)"/*/log/make.log 2>/dev/null | tail -n 1)
	warn "the kernel refused $MODULE: its CRC of $sym is not the one $whose loaded now exports, so it was built against another build of $whose${used:+ (its build took the CRCs from $used)}; rebuild it against the installed one: /usr/lib/nvidia-peer-memory/dkms-rebuild --force (a DKMS build; by hand: make KDIR=/lib/modules/$(uname -r)/build, which reads the CRCs of the driver's and OFED's modules installed for the kernel), then reload $whose if the installed one is newer than the loaded one"
}

do_stop() {
	if ! loaded "$MODULE"; then
		say "$MODULE is not loaded"
		return 0
	fi
	# rmmod, not modprobe -r: the GPU driver and ib_core stay loaded.
	if rmmod "$MODULE"; then
		say "$MODULE unloaded"
		return 0
	fi
	warn "failed to unload $MODULE (is it in use? see /sys/module/$MODULE/refcnt)"
	return 1
}

do_status() {
	if loaded "$MODULE"; then
		say "$MODULE is loaded (version $(cat "/sys/module/$MODULE/version" 2>/dev/null || echo unknown))"
		return 0
	fi
	say "$MODULE is not loaded"
	return 3
}

# start and restart (force-reload) do nothing unless ONBOOT=yes, as in
# Mellanox's nv_peer_mem: a loaded module stays as it is, and a package
# upgrade's restart does not load it. stop and status always work.
onboot_or_exit() {
	[ "$ONBOOT" = yes ] && return 0
	say "not $1 $MODULE: ONBOOT=$ONBOOT in $CONFIG (stop unloads it, modprobe loads it)"
	exit 0
}

case ${1:-} in
start)
	onboot_or_exit loading
	do_start
	;;
stop) do_stop ;;
restart | force-reload)
	onboot_or_exit restarting
	do_stop || exit 1
	do_start
	;;
status) do_status ;;
onboot) [ "$ONBOOT" = yes ] ;;
doctor)
	shift
	if ! command -v nvidia-peermem-doctor >/dev/null 2>&1; then
		warn "nvidia-peermem-doctor is not installed (it comes with the nvidia-peer-memory package)"
		exit 5
	fi
	exec nvidia-peermem-doctor "$@"
	;;
*)
	echo "Usage: nv_peer_mem {start|stop|restart|force-reload|status|doctor}" >&2
	exit 2
	;;
esac
