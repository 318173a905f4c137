#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# capture-host.sh OUTDIR [DOCTOR]: copies what nvidia-peermem-doctor reads on this
# host (sysfs, procfs, /lib/modules, /etc, /boot) into OUTDIR/root, and what
# other tools say about it into OUTDIR/tools, so that a fixture
# (tests/fixtures/) can keep what a real machine showed. Run it as root;
# it changes nothing. `nvidia-peermem-doctor --root OUTDIR/root` then reads
# the copy (the PCI tree, links included, is rebuilt as sysfs has it).
# With DOCTOR (a dynamically linked nvidia-peermem-doctor), what libcuda
# says about the GPUs goes to OUTDIR/root/cuda-probe.txt (--cuda-probe).
set -u
out=${1:?usage: capture-host.sh OUTDIR [DOCTOR]}
doctor=${2:-}
r=$out/root
t=$out/tools
mkdir -p "$r" "$t"
krel=$(uname -r)

# copy FILE...: each readable regular file (or sysfs attribute), if any.
copy() {
	for f; do
		[ -f "$f" ] && [ -r "$f" ] || continue
		mkdir -p "$r${f%/*}"
		cat "$f" >"$r$f" 2>/dev/null || rm -f "$r$f"
	done
}
# link PATH: the symbolic link PATH, as it is.
link() {
	[ -L "$1" ] || return 0
	mkdir -p "$r${1%/*}"
	ln -sfn "$(readlink "$1")" "$r$1"
}
# tool NAME CMD...: a command's output and exit status in tools/NAME.
tool() {
	n=$1
	shift
	{ "$@"; echo "[exit $?]"; } >"$t/$n" 2>&1
}

copy /proc/sys/kernel/osrelease /proc/cmdline /proc/config.gz /proc/sys/kernel/modules_disabled \
	/proc/sys/kernel/tainted /proc/modules /proc/driver/nvidia/version /proc/driver/nvidia/params
for f in /proc/driver/nvidia/gpus/*/*; do copy "$f"; done
# Only the symbols the doctor keeps (the whole file is megabytes).
mkdir -p "$r/proc"
grep -E ' (_text|nvidia_p2p_[a-z_]*|ib_(un)?register_peer_memory_client|ib_umem_dmabuf_get[a-z_]*|[a-z0-9_]*reg_user_mr_dmabuf)(	|$)' \
	/proc/kallsyms >"$r/proc/kallsyms"
wc -l </proc/kallsyms >"$t/kallsyms-lines"

for m in /sys/module/*; do
	name=${m##*/}
	case $name in
	nvidia* | nv_peer_mem | ib_* | mlx* | rdma* | module) ;;
	*) continue ;;
	esac
	copy "$m/version" "$m/initstate" "$m/srcversion" "$m/refcnt" "$m"/parameters/*
done
ls /sys/module >"$t/sys-module"

# PCI functions (bridges included): the bus links, attributes, IOMMU group.
for l in /sys/bus/pci/devices/*; do
	link "$l"
	d=$(readlink -f "$l")
	copy "$d/vendor" "$d/device" "$d/class" "$d/numa_node" "$d/resource" "$d/config" \
		"$d/subsystem_vendor" "$d/subsystem_device"
	link "$d/iommu_group"
done
for g in /sys/kernel/iommu_groups/*; do copy "$g/type"; done
for l in /sys/class/infiniband/* /sys/class/iommu/*; do link "$l"; done
copy /sys/kernel/security/lockdown /sys/kernel/debug/nvidia_peermem/stats
for f in /sys/firmware/efi/efivars/SecureBoot-* /sys/firmware/efi/mok-variables/*; do copy "$f"; done
ls -la /sys/firmware/efi /sys/kernel/security /sys/kernel/mm/memory_peers >"$t/sys-dirs" 2>&1

# Modules and their configuration.
mods=/lib/modules/$krel
copy "$mods/modules.dep" /boot/config-"$krel" "$mods/build/.config" "$mods/build/include/config/auto.conf"
find "$mods" -maxdepth 2 >"$t/lib-modules" 2>&1
find "$mods" \( -name '*peermem*' -o -name 'nv_peer_mem*' \) >"$t/peermem-files" 2>/dev/null
for ko in $(cat "$t/peermem-files"); do
	case $ko in *.ko) copy "$ko" ;; esac
	tool "modinfo-${ko##*/}" modinfo "$ko"
	tail -c 40 "$ko" | od -c >>"$t/modinfo-${ko##*/}" 2>&1
done
ls -la "$mods/build" "$mods/build/" "$mods/build/rust" "$mods/build/scripts/target.json" /boot >"$t/build-dir" 2>&1
for f in /etc/modprobe.d/* /run/modprobe.d/* /usr/lib/modprobe.d/* /lib/modprobe.d/* /etc/infiniband/* \
	/etc/dkms/framework.conf /etc/dkms/framework.conf.d/* /etc/os-release; do copy "$f"; done
ls -la /var/lib/dkms /var/lib/shim-signed/mok >"$t/mok-dirs" 2>&1

# The GPUs' own answer (it allocates 2 MiB per GPU for the dma-buf export probe).
if [ -n "$doctor" ]; then "$doctor" --cuda-probe >"$r/cuda-probe.txt" 2>"$t/cuda-probe.err"; fi
for m in /sys/kernel/mm/memory_peers/*; do copy "$m"/*; done

# What other tools say (for cross-checking; the doctor needs none of them).
tool uname uname -a
tool id id
tool path sh -c 'echo "$PATH"; for p in cargo rustc bindgen zcat gzip mokutil lspci nvidia-smi modinfo modprobe dkms; do printf "%s: %s\n" $p "$(command -v $p)"; done'
tool rustc rustc --version
tool rustc-sysroot rustc --print sysroot
tool bindgen bindgen --version
tool bindgen-verbose bindgen --version --verbose
tool lspci-nn lspci -nn
for g in $(lspci -D -d 10de: 2>/dev/null | cut -d' ' -f1); do tool "lspci-vv-$g" lspci -vv -s "$g"; done
tool nvidia-smi-q nvidia-smi -q
tool nvidia-smi-topo nvidia-smi topo -m
tool mokutil mokutil --sb-state
tool dmesg sh -c 'dmesg | grep -i -E "BAR|nvidia|lockdown|secure|module|rust" | head -n 200'
tool mounts cat /proc/mounts
