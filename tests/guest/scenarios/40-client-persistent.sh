# The default client layout (persistent_api_support=1): nv_mem pins
# persistently, in every MOFED generation and both page-table ABIs.
# Registrations of 64 KiB to 1 GiB, aligned and not, contiguous and not,
# and of a byte to a few OS pages (the kernel's page size read in the guest):
# each SG list must equal the GPU's DMA addresses; nothing stays pinned.
# The anchor (NVIDIA's module) runs its layout where none is named: from 560
# on the same persistent nv_mem by default; 550's (or 560's with
# persistent_api_support=0) persistent client, nv_mem_nc, takes these MRs
# (registered without invalidation). It runs only against the page-table
# ABI of its own nv-p2p.h (GPU_PT_ABI): it comes with its driver.
. /tests/lib.sh
. /tests/client-lib.sh

for mode in modern mid legacy; do
	for abi in ${GPU_PT_ABI:-1.2 2.0}; do
		t="$mode-$abi"
		load_stack "$t" "mode=$mode" "page_table_version=$abi" || continue
		if [ "$(peermem_pas "")" = 1 ]; then
			expect_match "$t/clients" "^nv_mem .*invalidation=0" "$(nvpm-tool core clients)"
		else
			skip "$t/clients" "the module under test runs persistent_api_support=0 (persistent nv_mem_nc)"
		fi
		for size in 64K 2M 64M 1G; do
			for layout in contiguous fragmented; do
				reg_and_check "$t/$size-$layout" "$size" "$layout" 0
			done
		done
		# Unaligned start and end: the core trims, the client covers whole pages.
		reg_and_check "$t/unaligned" 2M shuffled 4097
		# Ranges within one OS page, and across an OS page's or a GPU page's
		# end, in a buffer of two fragmented GPU pages: whatever the kernel's
		# page size (P), the SG list covers exactly the pages the core asks for.
		p=$(os_page_size)
		reg_range "$t/one-byte" 128K fragmented 0 1
		reg_range "$t/inside-os-page" 128K fragmented 1 $((p - 2))
		reg_range "$t/across-os-page" 128K fragmented $((p - 1)) 2
		reg_range "$t/across-gpu-page" 128K fragmented $((65536 - 1)) 2
		[ "$p" -ge 65536 ] ||
			reg_range "$t/os-pages-across-gpu-page" 128K fragmented $((65536 - p - 1)) $((p + 2))
		# A range that is not GPU memory is declined, with no side effect.
		expect_fail "$t/non-gpu-declined" nvpm-tool core reg 0x1000 64K
		if own_feature "$t/declines-counted"; then
			expect_match "$t/declines-counted" "^declines [1-9]" "$(cat $STATS)"
		fi
		# cudaFree of persistently pinned memory does not revoke it.
		va=$(nvpm-tool gpu alloc 1M)
		id=$(nvpm-tool core reg "$va" 1M)
		expect_eq "$t/free-no-callback" 0 "$(nvpm-tool gpu free "$va" 2>&1)"
		expect_eq "$t/still-mapped" mapped "$(nvpm-tool core state "$id" 2>&1)"
		expect_ok "$t/dereg-after-free" nvpm-tool core dereg "$id"
		unload_stack "$t"
	done
done
