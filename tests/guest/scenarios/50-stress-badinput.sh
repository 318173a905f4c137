# Stress, the catalogue of bad input (tests/stress/README.md, "Bad input"): every
# row of the table there that names this scenario is asserted here. Each bad
# input gets a defined errno or a clean decline and leaves nothing pinned,
# mapped or registered. Ranges go through the modern core in both client
# layouts; --unchecked makes the core simulator hand ranges that MOFED would
# refuse itself (zero length, wrap-around) to the clients anyway, to test the
# module's own checks.
. /tests/lib.sh
. /tests/client-lib.sh
. /tests/stress-lib.sh

K64=65536

# stat NAME: one of the module's statistics.
stat() { awk -v n="$1" '$1 == n { print $2 }' "$STATS" 2>/dev/null; }

# good_reg NAME VA SIZE [FLAGS...]: registers, checks the SG list against the
# GPU's DMA addresses, deregisters; prints nothing, asserts.
good_reg() {
	gr_name=$1
	shift
	if gr_id=$(nvpm-tool core reg "$@" 2>&1); then
		expect_ok "$gr_name" nvpm-tool expect-sg "$gr_id"
		nvpm-tool core dereg "$gr_id"
	else
		fail "$gr_name" "$gr_id"
	fi
	expect_nothing_held "$gr_name/nothing-held"
}

for layout in default legacy; do
	t=$layout
	if [ $layout = default ]; then cfg=modern-persistent flags=""; else cfg=modern-revocable flags="--inval"; fi
	stress_load $cfg || continue
	a=$(nvpm-tool gpu alloc 1M --layout fragmented)
	b=$(nvpm-tool gpu alloc 1M --layout shuffled) # a + 1M + 64K: a 64 KiB hole between them
	expect_eq "$t/hole-between-buffers" $((a + 0x110000)) $((b))

	# Ranges.
	d0=$(stat declines)
	reg_fails "$t/zero-length" EFAULT "$a" 0 --unchecked $flags
	if own_feature "$t/zero-length/declined"; then
		expect_match "$t/zero-length/declined" "^[1-9]" $(($(stat declines) - d0))
	fi
	reg_fails "$t/wrap-around" EFAULT 0xffffffffffff0000 1M --unchecked $flags
	reg_fails "$t/cover-wraps" EFAULT 0xfffffffffffe0001 0x1fffe $flags
	good_reg "$t/unaligned-start" $((a + 4097)) $((0x100000 - 4097)) $flags
	good_reg "$t/unaligned-end" "$a" $((0x100000 - 4097)) $flags
	good_reg "$t/unaligned-both" $((a + 12345)) 300000 $flags
	good_reg "$t/last-byte" $((a + 0xfffff)) 1 $flags
	good_reg "$t/ends-at-buffer-end" $((a + K64)) $((0x100000 - K64)) $flags
	good_reg "$t/read-only" "$a" 1M --ro $flags
	reg_fails "$t/one-byte-past-end" EFAULT "$a" $((0x100000 + 1)) $flags
	reg_fails "$t/starts-in-hole" EFAULT $((b - 4096)) $((K64 + 4096)) $flags
	reg_fails "$t/spans-two-buffers" EFAULT $((a + 0xf0000)) $((0x30000)) $flags
	reg_fails "$t/in-hole" EFAULT $((a + 0x100000)) $K64 $flags
	reg_fails "$t/address-zero" EFAULT 0 $K64 $flags
	reg_fails "$t/not-gpu-memory" EFAULT 0x10000 $K64 $flags
	reg_fails "$t/huge-size" EFAULT "$a" $((1 << 50)) $flags
	reg_fails "$t/larger-than-vram" EFAULT "$a" 8G $flags
	c=$(nvpm-tool gpu alloc 1M)
	nvpm-tool gpu free "$c" >/dev/null
	reg_fails "$t/freed-buffer" EFAULT "$c" 1M $flags

	# Two registrations of one range: two pins, independent.
	id1=$(nvpm-tool core reg "$a" 1M $flags)
	id2=$(nvpm-tool core reg "$a" 1M $flags)
	live=$(($(nvpm-tool gpu counter pins.live) + $(nvpm-tool gpu counter pins.persistent)))
	expect_eq "$t/same-range-twice/two-pins" 2 "$live"
	nvpm-tool core dereg "$id1"
	expect_ok "$t/same-range-twice/other-intact" nvpm-tool expect-sg "$id2"
	nvpm-tool core dereg "$id2"
	expect_nothing_held "$t/same-range-twice/nothing-held"

	# A DMA device that is no PCI function: refused before the driver sees it.
	m0=$(nvpm-tool gpu counter calls.dma_map_pages)
	reg_fails "$t/non-pci-device" EINVAL "$a" 1M --nonpci $flags
	expect_eq "$t/non-pci-device/driver-not-called" "$m0" "$(nvpm-tool gpu counter calls.dma_map_pages)"

	# What the driver hands back is checked before use: a 4 KiB page size
	# is declined (EFAULT) or refused at dma_map (EINVAL), never handed to
	# the driver's dma_map_pages. The page table's version and entry count
	# are this module's own checks (the anchor comes with its driver).
	nvpm-tool gpu set bad_data page_size
	reg_fails "$t/driver-page_size" "EFAULT|EINVAL" "$a" 1M $flags
	if own_feature "$t/driver-pt_version+entries"; then
		for bad in pt_version entries; do
			nvpm-tool gpu set bad_data $bad
			reg_fails "$t/driver-$bad" EFAULT "$a" 1M $flags
		done
	fi
	expect_counter "$t/driver-page_size/never-mapped" gpu violation.bad_page_size 0
	nvpm-tool gpu set bad_data dma_version
	reg_fails "$t/driver-dma_version" EINVAL "$a" 1M $flags
	nvpm-tool gpu set bad_data none
	nvpm-tool gpu set cpu_cacheable 1
	good_reg "$t/cpu-cacheable" "$a" 1M $flags
	if own_feature "$t/cpu-cacheable/logged"; then
		expect_dmesg "$t/cpu-cacheable/logged" "nvidia_peermem: pages at .* are CPU-cacheable"
	fi
	nvpm-tool gpu set cpu_cacheable 0
	n0=$(dmesg | grep -c 'CPU-cacheable')
	nvpm-tool gpu set page_table_version 1.2
	good_reg "$t/v1.2-table-junk-flags" "$a" 1M $flags
	expect_eq "$t/v1.2-table-junk-flags/flags-not-read" "$n0" "$(dmesg | grep -c 'CPU-cacheable')"
	nvpm-tool gpu set page_table_version "${GPU_PT_ABI:-2.0}"

	# A core that calls dma_unmap or put_pages a second time: refused
	# (EINVAL for dma_unmap), counted, the pages are given back once. No
	# MOFED does that: this module's own defence.
	agains="dma_unmap put_pages both"
	own_feature "$t/second-calls" || agains=""
	for again in $agains; do
		n="$t/second-$again"
		id=$(nvpm-tool core reg "$a" 1M $flags)
		o0=$(stat errors_out_of_order)
		p0=$(($(nvpm-tool gpu counter calls.put_pages) + $(nvpm-tool gpu counter calls.put_pages_persistent)))
		out=$(nvpm-tool core dereg "$id" --again $again 2>&1)
		if [ $again = put_pages ]; then
			expect_eq "$n" "again put_pages" "$out"
		else
			expect_eq "$n" "again dma_unmap -22" "$out"
		fi
		want=1
		[ $again = both ] && want=2
		expect_eq "$n/counted" $want $(($(stat errors_out_of_order) - o0))
		expect_nothing_held "$n/nothing-held"
		p1=$(($(nvpm-tool gpu counter calls.put_pages) + $(nvpm-tool gpu counter calls.put_pages_persistent)))
		expect_eq "$n/one-unpin" 1 $((p1 - p0))
	done

	# rmmod while a registration lives: refused, the registration intact.
	id=$(nvpm-tool core reg "$a" 1M $flags)
	if out=$(rmmod nvidia_peermem 2>&1); then
		fail "$t/rmmod-with-registration" "unloaded"
		break
	fi
	expect_match "$t/rmmod-with-registration" "in use|Resource temporarily unavailable" "$out"
	expect_ok "$t/rmmod-with-registration/intact" nvpm-tool expect-sg "$id"
	nvpm-tool core dereg "$id"
	nvpm-tool gpu free "$a" >/dev/null
	nvpm-tool gpu free "$b" >/dev/null
	unload_stack "$t"
done

# peerdirect_support=0 on a MOFED <= 5.0 core: the _ex fields of the
# revocable nv_mem land on get_context_private_data, so that core never
# offers it ordinary MRs; they go to the persistent nv_mem_nc.
t=legacy-core-without-peerdirect
load_stack $t "mode=legacy" "" "persistent_api_support=0" || exit 0
if [ "$(cat /sys/module/nvidia_peermem/parameters/peerdirect_support)" != 0 ] || [ "$(nvpm-tool core mode)" != legacy ]; then
	fail "$t/fresh-stack" "the previous stack could not be unloaded"
	exit 0
fi
expect_match "$t/nv_mem-skipped" "^nv_mem .*context_private_data=1" "$(nvpm-tool core clients)"
va=$(nvpm-tool gpu alloc 1M)
if id=$(nvpm-tool core reg "$va" 1M --inval 2>&1); then
	expect_eq "$t/goes-to-nv_mem_nc" nv_mem_nc "$(nvpm-tool core show "$id" client 2>&1)"
	nvpm-tool core dereg "$id"
else
	fail "$t/goes-to-nv_mem_nc" "$id"
fi
nvpm-tool gpu free "$va" >/dev/null
unload_stack $t
stress_done
