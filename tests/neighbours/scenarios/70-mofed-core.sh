# MOFED's real peer-memory core (its DKMS-built ib_core and ib_uverbs, in
# updates/dkms), the GPU simulator as the installed driver's stand-in, and
# an HCA played by ofed_hca_test (tests/neighbours/hca): the module loads
# with the CRCs its DKMS build read, registers with MOFED's core, and
# registrations, an invalidation and deregistrations go through MOFED's
# own ib_umem_get_peer() and peer_mem.c. Then unload in each order an admin
# may try. What the HCA checks holds for any client (the table covers the
# range, its DMA addresses are the GPU's for that device); checks of this
# module's own log lines are own_feature.
. /tests/lib.sh
M=/sys/module/nvidia_peermem
V=$(cat /tests/expected-version)
CTL=/sys/kernel/debug/ofed_hca_test/ctl
MRS=/sys/kernel/debug/ofed_hca_test/mrs

# hca CMD: one command to the HCA, then its answer.
hca() {
	echo "$1" >$CTL && cat $CTL
}
# mofed_loaded: the loaded ib_uverbs and ib_core are MOFED's (they hold
# its mlx_compat; the kernel's own have no such module).
mofed_loaded() {
	test -e /sys/module/mlx_compat/holders/ib_uverbs && test -e /sys/module/mlx_compat/holders/ib_core
}

# pins: the GPU's live pins of either kind (the driver's view).
pins() {
	echo $(($(nvpm-tool gpu counter pins.live) + $(nvpm-tool gpu counter pins.persistent)))
}

# modprobe resolves the RDMA core to MOFED's modules, DKMS's updates/ first
# (kmod's modprobe: busybox sh runs its own applet for a bare name).
deps=$(/usr/sbin/modprobe --show-depends ib_uverbs 2>&1)
expect_match modprobe-resolves-mofed "updates/dkms/ib_uverbs\.ko" "$deps"
expect_match modprobe-resolves-mofed-core "updates/dkms/ib_core\.ko" "$deps"

# --- load: modprobe nvidia-peermem pulls in MOFED's core --------------------
mark_dmesg load
expect_ok modprobe modprobe nvidia-peermem
expect_eq version "$V" "$(cat $M/version 2>&1)"
expect_ok mofed-core-loaded mofed_loaded
if own_feature banner-core; then
	expect_dmesg banner-core "nvidia_peermem: version $V loaded: .*peer-memory core ib_uverbs"
fi
if dmesg_since_mark | grep -qE 'disagrees about version|Unknown symbol'; then
	fail crcs-accepted "$(dmesg_since_mark | grep -E 'disagrees about version|Unknown symbol' | head -n 1)"
else
	pass crcs-accepted
fi
expect_ok hca-load modprobe ofed_hca_test

# --- registrations as an HCA makes them, default parameters -----------------
# One with invalidation support (an MR), one without (what MOFED asks for a
# CQ, QP or doorbell): both are pinned, cover the range, and unpin at
# deregistration, whichever client takes them.
va=$(nvpm-tool gpu alloc 2M)
expect_match reg-inval "^mr 0 nents [0-9]+ bytes 2097152 first 0x[0-9a-f]+$" "$(hca "reg $va 2097152 inval")"
expect_match pinned "^[1-9][0-9]*$" "$(pins)"
expect_match reg-listed "^0 $va 2097152 nents [0-9]+ bytes 2097152 invalidated 0$" "$(cat $MRS)"
# A contiguous buffer is one DMA segment (mlx5's 2 GiB max_seg_size).
if own_feature coalesced; then
	expect_match coalesced "^0 $va 2097152 nents 1 " "$(cat $MRS)"
fi
# rmmod while the core holds a registration: each is refused, nothing changes.
expect_fail rmmod-peermem-in-use rmmod nvidia_peermem
expect_fail rmmod-uverbs-in-use rmmod ib_uverbs
expect_fail rmmod-gpu-in-use rmmod nvidia
expect_ok still-loaded sh -c "test -d $M && test -d /sys/module/ib_uverbs && test -d /sys/module/nvidia"
expect_eq dereg "dereg 0" "$(hca "dereg 0")"
expect_eq unpinned 0 "$(pins)"
va2=$(nvpm-tool gpu alloc 4M --layout fragmented)
expect_match reg-no-inval "^mr 1 nents [0-9]+ bytes 4194304 first 0x[0-9a-f]+$" "$(hca "reg $va2 4194304")"
expect_match no-inval-pinned "^[1-9][0-9]*$" "$(pins)"
expect_eq dereg-no-inval "dereg 1" "$(hca "dereg 1")"
expect_eq no-inval-unpinned 0 "$(pins)"
expect_eq mrs-empty "" "$(cat $MRS)"
expect_eq free-unregistered 0 "$(nvpm-tool gpu free "$va" 2>&1)"
expect_eq free-unregistered-2 0 "$(nvpm-tool gpu free "$va2" 2>&1)"

# --- memory no client owns: MOFED's core returns the pin's error ------------
expect_eq not-gpu-memory "error -14" "$(hca "reg 0x7e0000000000 65536 inval")"
va=$(nvpm-tool gpu alloc 2M)
# A range past the buffer's end: the client declines it, the pin's error.
expect_eq past-the-buffer "error -14" "$(hca "reg $va 4194304 inval")"
expect_eq free-declined 0 "$(nvpm-tool gpu free "$va" 2>&1)"

# --- NVIDIA's legacy layout (persistent_api_support=0): a revocable nv_mem --
# The MR's pages are revocable: cudaFree fires the driver's free callback,
# the client invalidates through MOFED's core, which calls the HCA's
# invalidation function; the HCA then deregisters as mlx5 does.
expect_ok unload-for-legacy rmmod nvidia_peermem
expect_ok load-legacy modprobe nvidia-peermem persistent_api_support=0
va=$(nvpm-tool gpu alloc 2M)
expect_match legacy-reg-inval "^mr 2 nents [0-9]+ bytes 2097152 first 0x[0-9a-f]+$" "$(hca "reg $va 2097152 inval")"
expect_match legacy-revocable-pin "^[1-9][0-9]*$" "$(nvpm-tool gpu counter pins.live 2>&1)"
expect_eq free-fires-callback 1 "$(nvpm-tool gpu free "$va" 2>&1)"
expect_match hca-invalidated "^2 $va 2097152 nents [0-9]+ bytes 2097152 invalidated 1$" "$(cat $MRS)"
expect_eq unpinned-by-free 0 "$(pins)"
expect_eq dereg-after-free "dereg 2" "$(hca "dereg 2")"
# nv_mem_nc: a registration without invalidation support takes persistent pages.
va=$(nvpm-tool gpu alloc 2M)
expect_match legacy-reg-nc "^mr 3 nents" "$(hca "reg $va 2097152")"
expect_match legacy-nc-persistent "^[1-9][0-9]*$" "$(nvpm-tool gpu counter pins.persistent 2>&1)"
expect_eq legacy-dereg-nc "dereg 3" "$(hca "dereg 3")"
expect_eq legacy-free 0 "$(nvpm-tool gpu free "$va" 2>&1)"
expect_ok clean nvpm-tool expect-clean

# --- unload in each order the kernel lets an admin take ---------------------
# 1. the client first: MOFED's unregistration returns (no registration
#    left), then the HCA, the GPU, MOFED's core.
expect_ok unload-peermem-first rmmod nvidia_peermem
expect_ok unload-hca rmmod ofed_hca_test
expect_ok unload-gpu rmmod nvidia
expect_ok unload-mofed rmmod ib_uverbs ib_core mlx_compat
# 2. the HCA loaded before the client, unloaded before it; a registration
#    made in between is deregistered by the HCA's unload.
expect_ok load-hca-first modprobe ofed_hca_test
expect_ok load-peermem-after modprobe nvidia-peermem
va=$(nvpm-tool gpu alloc 2M)
expect_match reg-order-2 "^mr 0 nents" "$(hca "reg $va 2097152 inval")"
expect_ok unload-hca-with-mr rmmod ofed_hca_test
expect_eq hca-unload-unpinned 0 "$(pins)"
expect_ok unload-peermem-second rmmod nvidia_peermem
expect_eq free-order-2 0 "$(nvpm-tool gpu free "$va" 2>&1)"
# 3. the GPU driver reloaded under a loaded client is refused; the client
#    out, then the GPU, then the core: nothing is left.
expect_ok load-order-3 modprobe nvidia-peermem
expect_fail rmmod-gpu-under-client rmmod nvidia
expect_ok unload-order-3 rmmod nvidia_peermem nvidia
expect_ok unload-mofed-last rmmod ib_uverbs ib_core mlx_compat
expect_ok nothing-left sh -c "! grep -qE '^(nvidia_peermem|nvidia|ib_uverbs|ib_core|mlx_compat|ofed_hca_test) ' /proc/modules"

# --- the RDMA core changed under the module, which was not rebuilt ----------
# Another build of the peer-memory API in place of MOFED's (the MOFED
# simulator, /tests/mofed_peer_sim.ko: the same symbols, its own CRCs): the
# kernel refuses the module built against MOFED's, and the doctor says
# whose CRC it is and how to rebuild.
OURS=/lib/modules/$(uname -r)/extra/nvidia_peermem.ko
expect_ok other-core-loads sh -c "insmod /tests/mofed_peer_sim.ko && modprobe nvidia"
mark_dmesg stale
expect_fail stale-refused insmod $OURS
if loaded nvidia_peermem; then fail stale-not-loaded "loaded anyway"; rmmod nvidia_peermem; else pass stale-not-loaded; fi
expect_dmesg stale-kernel-says "nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client"
doctor_out=$(nvidia-peermem-doctor 2>&1)
expect_match doctor-names-refusal "FAIL +module.loaded +nvidia_peermem is not loaded: the kernel refused it, its CRC of ib_register_peer_memory_client is not the one the RDMA core( \(OFED\))? loaded now exports" "$doctor_out"
expect_match doctor-names-fix "dkms-rebuild --force" "$doctor_out"
expect_ok unload-other-core rmmod nvidia mofed_peer_sim
