# Symbol versions (CONFIG_MODVERSIONS), on a kernel that has them (its own
# ib_core.ko carries a __versions table; elsewhere: SKIP). The module carries
# CRCs, none of them 0, for what it imports from the GPU driver and the RDMA
# core, and the kernel accepts them: the providers loaded are the builds it
# was built against.
# With /tests/nvidia-other.ko (the packaging suite's other build of the GPU
# driver: the simulator built from a real 550 driver's nv-p2p.h, whose
# nvidia_p2p_* CRCs differ) loaded instead: the kernel refuses the module
# ("disagrees about version of symbol"), and the doctor and `nv_peer_mem
# start` say whose CRC differs and how to rebuild.
# shellcheck shell=sh
# shellcheck source=/dev/null
. /tests/lib.sh
K=/lib/modules/$(uname -r)
OURS=$K/extra/nvidia_peermem.ko
KMOD=/usr/sbin # kmod's modprobe, modinfo and depmod (busybox's lack --dump-modversions)

if [ -z "$($KMOD/modprobe --dump-modversions "$($KMOD/modinfo -F filename ib_core)" 2>/dev/null)" ]; then
	skip modversions "the kernel has no CONFIG_MODVERSIONS (its ib_core.ko has no __versions)"
	exit 0
fi

# crc_of FILE SYMBOL: the CRC FILE's __versions table holds for SYMBOL.
crc_of() { $KMOD/modprobe --dump-modversions "$1" 2>/dev/null | awk -v s="$2" '$2 == s { print $1 }'; }

for sym in nvidia_p2p_get_pages nvidia_p2p_put_pages nvidia_p2p_dma_map_pages ib_register_peer_memory_client; do
	crc=$(crc_of "$OURS" $sym)
	case $crc in
	"" | 0x00000000) fail "crc-$sym" "__versions has '${crc:-nothing}' for $sym" ;;
	*) pass "crc-$sym" ;;
	esac
done

sim_unload
! loaded nvidia_peermem || rmmod nvidia_peermem
expect_ok load-sims sh -c 'modprobe mofed_peer_sim && modprobe nvidia'
mark_dmesg load
expect_ok modprobe modprobe nvidia_peermem
if loaded nvidia_peermem; then pass loaded; else fail loaded "not in /sys/module"; fi
expect_ok rmmod rmmod nvidia_peermem

if [ ! -e /tests/nvidia-other.ko ]; then
	skip stale-crc "no /tests/nvidia-other.ko (the packaging suite provides it)"
	exit 0
fi
# Another build of the GPU driver loaded (the GPU simulator built from a
# real 550 driver's nv-p2p.h): the module was not rebuilt for it.
sim_unload
expect_ok other-driver-loads sh -c 'modprobe mofed_peer_sim && insmod /tests/nvidia-other.ko'
mark_dmesg stale
expect_fail stale-refused modprobe nvidia_peermem
if loaded nvidia_peermem; then fail stale-not-loaded "loaded anyway"; rmmod nvidia_peermem; else pass stale-not-loaded; fi
expect_dmesg stale-kernel-says "nvidia_peermem: disagrees about version of symbol nvidia_p2p_[a-z_]+"
expect_match doctor-names-refusal "FAIL +module.loaded +nvidia_peermem is not loaded: the kernel refused it, its CRC of nvidia_p2p_[a-z_]+ is not the one the NVIDIA driver loaded now exports" \
	"$(nvidia-peermem-doctor 2>&1)"

# The service, as the packages install it, beside the other driver build.
cp -a /tests/pkgroot/. /
out=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin dash /usr/lib/nvidia-peer-memory/nv_peer_mem start 2>&1)
expect_eq service-start-fails 1 "$?"
expect_match service-names-whose "the kernel refused nvidia_peermem: its CRC of nvidia_p2p_[a-z_]+ is not the one the NVIDIA driver loaded now exports" "$out"
expect_match service-names-fix "rebuild it against the installed one: /usr/lib/nvidia-peer-memory/dkms-rebuild --force" "$out"
# The driver it was built against back: it loads.
expect_ok other-driver-unloads rmmod nvidia
expect_ok good-again sh -c 'modprobe nvidia_peermem && rmmod nvidia_peermem'
sim_unload
