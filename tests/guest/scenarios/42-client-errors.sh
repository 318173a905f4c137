# Bad input and provider failures: each gets a clear error and leaves
# nothing pinned, mapped or registered (the simulators' counters prove it).
. /tests/lib.sh
. /tests/client-lib.sh

# reg_fails NAME ERRNO_NAME VA SIZE [FLAGS...]: the registration fails with ERRNO_NAME.
reg_fails() {
	rf_name=$1 rf_errno=$2
	shift 2
	if rf_out=$(nvpm-tool core reg "$@" 2>&1); then
		fail "$rf_name" "registered as MR $rf_out"
		nvpm-tool core dereg "$rf_out"
	else
		expect_match "$rf_name" "\\($rf_errno\\)" "$rf_out"
	fi
}

for layout in default legacy; do
	if [ $layout = default ]; then params=""; flags=""; else params="persistent_api_support=0"; flags="--inval"; fi
	t=$layout
	load_stack "$t" "mode=modern" "" "$params" || continue
	va=$(nvpm-tool gpu alloc 4M --layout fragmented)
	# Provider failures at each step (both pin calls: the core tries the
	# next client when one declines). A client that pins in acquire declines
	# the range when the pin fails, so no client claims it: the core's
	# EFAULT. One that pins in get_pages fails it with the driver's errno,
	# which MOFED passes on.
	nvpm-tool gpu inject get_pages 1 12
	nvpm-tool gpu inject get_pages_persistent 1 12
	reg_fails "$t/pin-enomem" "EFAULT|ENOMEM" "$va" 4M $flags
	if own_feature "$t/bar1-hint"; then
		expect_dmesg "$t/bar1-hint" "nvidia_peermem: cannot pin 4194304 bytes at .*BAR1 space exhausted"
	fi
	nvpm-tool gpu inject off
	nvpm-tool gpu inject dma_map_pages 1 5
	reg_fails "$t/map-eio" EIO "$va" 4M $flags
	nvpm-tool gpu inject off
	expect_nothing_held "$t/clean-after-failures"

	# What the driver hands back is validated before use. The anchor is
	# built with the driver it comes with (one package): it checks only the
	# page size and the DMA mapping's version, so the page table's version
	# and entry count are this module's own checks.
	bads="page_size dma_version"
	if own_feature "$t/bad-pt_version+entries"; then bads="pt_version $bads entries"; fi
	for bad in $bads; do
		nvpm-tool gpu set bad_data $bad
		if nvpm-tool core reg "$va" 4M $flags >/dev/null 2>&1; then
			fail "$t/bad-$bad" "registered"
			nvpm-tool core dereg all
		else
			pass "$t/bad-$bad"
		fi
		expect_nothing_held "$t/bad-$bad-clean"
	done
	nvpm-tool gpu set bad_data none

	# Bad ranges and devices.
	reg_fails "$t/zero-length" "E[A-Z]*" "$va" 0 $flags
	reg_fails "$t/wrap-around" "E[A-Z]*" 0xffffffffffff0000 1M $flags
	reg_fails "$t/non-gpu" "E[A-Z]*" 0x10000 64K $flags
	reg_fails "$t/straddles-end" "E[A-Z]*" "$((va + 0x300000))" 2M $flags
	reg_fails "$t/non-pci-device" EINVAL "$va" 64K --nonpci $flags
	expect_counter "$t/non-pci-device/no-bad-peer" gpu violation.bad_peer 0
	expect_nothing_held "$t/clean-after-bad-input"

	# rmmod is refused while a registration lives, and clean afterwards.
	id=$(nvpm-tool core reg "$va" 1M $flags)
	expect_fail "$t/rmmod-refused" rmmod nvidia_peermem
	expect_ok "$t/still-loaded" loaded nvidia_peermem
	expect_ok "$t/dereg" nvpm-tool core dereg "$id"
	expect_eq "$t/free" 0 "$(nvpm-tool gpu free "$va" 2>&1)"
	unload_stack "$t"
done

# MIG / vGPU: the persistent API is refused; MRs fall back to revocable
# pages. The fallback client is this module's own: NVIDIA's has none (its
# default persistent nv_mem, 560 and later, declines such MRs).
t=fallback
own_feature "$t" || exit 0
load_stack $t "mode=modern" "persistent_api=0" || exit 0
va=$(nvpm-tool gpu alloc 2M)
id=$(nvpm-tool core reg "$va" 2M --inval)
expect_eq "$t/owner" nv_mem_fallback "$(nvpm-tool core show "$id" client 2>&1)"
expect_ok "$t/sg" nvpm-tool expect-sg "$id"
id2=$(nvpm-tool core reg "$va" 1M --inval)
expect_eq "$t/logged-once" 1 "$(dmesg | grep -c 'persistent pinning refused')"
reg_fails "$t/no-inval-mr-refused" "E[A-Z]*" "$va" 1M
expect_eq "$t/free-invalidates-both" 2 "$(nvpm-tool gpu free "$va" 2>&1)"
expect_ok "$t/dereg" nvpm-tool core dereg "$id"
expect_ok "$t/dereg2" nvpm-tool core dereg "$id2"
unload_stack $t
