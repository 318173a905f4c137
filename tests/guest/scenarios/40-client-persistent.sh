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

# reg_trim NAME OFFSET LENGTH: reg_range in a buffer of two fragmented GPU
# pages, and the core trimmed as MOFED's rule says: only a modern core,
# only when the client's page size is not the OS's; the SG list starts at
# the range's start aligned down to the OS page if trimmed, else to the
# client's page.
reg_trim() {
	rt_va=$(nvpm-tool gpu alloc 128K --layout fragmented) || { fail "$1" "alloc failed"; return; }
	rt_start=$((rt_va + $2))
	if rt_id=$(nvpm-tool core reg "$(printf '0x%x' $rt_start)" "$3" 2>&1); then
		expect_ok "$1/sg" nvpm-tool expect-sg "$rt_id"
		rt_pgsz=$(nvpm-tool core show "$rt_id" page_size)
		rt_want=0 rt_unit=$rt_pgsz
		if [ "$mode" = modern ] && [ "$rt_pgsz" != "$(os_page_size)" ]; then
			rt_want=1 rt_unit=$(os_page_size)
		fi
		expect_eq "$1/trimmed" "$rt_want" "$(nvpm-tool core show "$rt_id" trimmed)"
		expect_eq "$1/sg-start" "$(printf '%#x' $((rt_start / rt_unit * rt_unit)))" "$(nvpm-tool core show "$rt_id" sg_va)"
		expect_ok "$1/dereg" nvpm-tool core dereg "$rt_id"
	else
		fail "$1/reg" "$rt_id"
	fi
	nvpm-tool gpu free "$rt_va" >/dev/null
}

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
		# Ranges that tell the page sizes apart: 4 KiB at 4 KiB, from the
		# second byte, the last byte of a GPU page, 8 KiB at 60 KiB. A
		# modern core trims the SG list to OS pages only where the client's
		# pages are larger (MOFED's ib_peer_umem_get calls fix_peer_sgls
		# only when get_page_size differs from PAGE_SIZE): not with 64 KiB
		# pages, where the list starts at the 64 KiB-aligned address.
		reg_trim "$t/4k-at-4k" 4096 4096
		reg_trim "$t/from-second-byte" 1 8192
		reg_trim "$t/last-byte-of-gpu-page" 65535 1
		reg_trim "$t/8k-at-60k" 61440 8192
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
