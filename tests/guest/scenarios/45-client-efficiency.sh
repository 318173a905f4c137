# What the benchmark (make bench) measures that is a count, not a time, so
# that it holds in every run: a contiguous 1 GiB registration is 1 SGE, not
# 16384; a fragmented one is one SGE per contiguous run; each registration
# pins, maps, unmaps and unpins exactly once (persistent and revocable
# clients, single registrations and the core's timed loop); SGEs are bounded
# by the DMA device's maximum segment size (mofed_peer_sim max_seg_size=,
# as mlx5 sets it), and the core's checks pass on coalesced lists in every
# MOFED generation.
# In the anchor suite (NVIDIA's module: two pins per revocable registration,
# one SGE per 64 KiB page, no statistics) these are this module's own
# features: only what any client must do is checked there (the SG list is
# right, every pin is unpinned and every map unmapped, SGEs within
# max_seg_size).
. /tests/lib.sh
. /tests/client-lib.sh

G1=1073741824

# calls T PIN UNPIN N: since the last `nvpm-tool gpu reset`, N pins with PIN,
# N maps, N unmaps, N unpins with UNPIN and no other API call. For the anchor
# (own_feature), T-balanced: as many unpins as pins, unmaps as maps, and at
# least N maps.
calls() {
	nvpm-tool gpu wait-idle >/dev/null || fail "$1/idle" "pins left"
	c=$(nvpm-tool gpu counters)
	got=""
	for f in get_pages get_pages_persistent dma_map_pages dma_unmap_pages put_pages put_pages_persistent; do
		got="$got $f=$(printf '%s\n' "$c" | awk -v n="calls.$f" '$1 == n {print $2}')"
	done
	if own_feature "$1"; then
		want=""
		for f in get_pages get_pages_persistent dma_map_pages dma_unmap_pages put_pages put_pages_persistent; do
			case $f in
			"$2" | "$3" | dma_map_pages | dma_unmap_pages) want="$want $f=$4" ;;
			*) want="$want $f=0" ;;
			esac
		done
		expect_eq "$1" "$want" "$got"
	else
		# shellcheck disable=SC2046,SC2086 # the six counts, in order
		set -- "$1" "$4" $(printf '%s\n' $got | sed 's/.*=//')
		if [ $(($3 + $4)) = $(($7 + $8)) ] && [ "$5" = "$6" ] && [ "$5" -ge "$2" ]; then
			pass "$1-balanced"
		else
			fail "$1-balanced" "$got"
		fi
	fi
}

sges() { awk '$1 == "sges" {print $2}' "$STATS" 2>/dev/null; }

# own_eq NAME EXPECTED ACTUAL: expect_eq of a count of this module's design.
own_eq() { if own_feature "$1"; then expect_eq "$@"; fi; }

# one T VA SIZE PIN UNPIN [REG_FLAGS...]: one registration of SIZE at VA;
# checks its SG list and the calls it made; leaves its SGE count in nmap and
# the length of its first SGE in len0.
one() {
	o_t=$1 o_va=$2 o_size=$3 o_pin=$4 o_unpin=$5
	shift 5
	nvpm-tool gpu reset
	s0=$(sges)
	nmap=0 len0=0
	if ! id=$(nvpm-tool core reg "$o_va" "$o_size" "$@" 2>&1); then
		fail "$o_t/reg" "$id"
		return
	fi
	nmap=$(nvpm-tool core show "$id" nmap 2>&1)
	len0=$(nvpm-tool core sg "$id" 2>&1 | awk 'NR == 1 {print $2}')
	expect_ok "$o_t/sg" nvpm-tool expect-sg "$id"
	own_eq "$o_t/stats-sges" "$nmap" $(($(sges) - s0))
	expect_ok "$o_t/dereg" nvpm-tool core dereg "$id"
	calls "$o_t/one-pin-map-unmap-unpin" "$o_pin" "$o_unpin" 1
}

# Every MOFED generation, default layout: nv_mem pins persistently.
for mode in modern mid legacy; do
	t=$mode
	load_stack "$t" "mode=$mode" "" || continue
	expect_dmesg "$t/max-seg-size" "dma_device 0000:00:00.0, max_seg_size 2147483648"
	va=$(nvpm-tool gpu alloc 1G)
	one "$t/1G-contiguous" "$va" 1G get_pages_persistent put_pages_persistent
	own_eq "$t/1G-contiguous-one-sge" 1 "$nmap"
	own_eq "$t/1G-contiguous-sge" "$G1" "$len0"
	# The core's timed loop, with its checks: N registrations, N of each call.
	nvpm-tool gpu reset
	expect_match "$t/loop" "^count 10 " "$(nvpm-tool core reg "$va" 1G --count 10 2>&1)"
	calls "$t/loop-calls" get_pages_persistent put_pages_persistent 10
	nvpm-tool gpu free "$va" >/dev/null
	# A fragmented GiB: one SGE per run of contiguous pages.
	va=$(nvpm-tool gpu alloc 1G --layout fragmented)
	one "$t/1G-fragmented" "$va" 1G get_pages_persistent put_pages_persistent
	own_eq "$t/1G-fragmented-runs" "$(nvpm-tool gpu runs "$va" | wc -w)" "$nmap"
	if [ "$mode" = modern ] && own_feature "$t/slab-chunks"; then
		# Its chunks (510 entries each) come from the module's own slab
		# cache, which admins see in /proc/slabinfo.
		id=$(nvpm-tool core reg "$va" 1G)
		active=$(awk '$1 == "nvidia_peermem_sg_large" {print $2}' /proc/slabinfo)
		expect_ok "$t/slab-chunks" test "${active:-0}" -ge $(((nmap + 509) / 510))
		nvpm-tool core dereg "$id"
	fi
	nvpm-tool gpu free "$va" >/dev/null
	# Unaligned start and end inside a contiguous buffer: one SGE; a modern
	# core trims it from both ends, the tool checks it byte for byte.
	va=$(nvpm-tool gpu alloc 4M)
	one "$t/unaligned" $((va + 0x11001)) $((0x200000 - 0x3000)) get_pages_persistent put_pages_persistent
	own_eq "$t/unaligned-one-sge" 1 "$nmap"
	nvpm-tool gpu free "$va" >/dev/null
	unload_stack "$t"
done

# NVIDIA's legacy layout: the revocable nv_mem also pins once (the pin of its
# ownership probe), and unpins once, in release.
t=revocable
load_stack "$t" "" "" "persistent_api_support=0" || exit 0
va=$(nvpm-tool gpu alloc 1G)
one "$t/1G-contiguous" "$va" 1G get_pages put_pages --inval
own_eq "$t/1G-contiguous-one-sge" 1 "$nmap"
nvpm-tool gpu reset
expect_match "$t/loop" "^count 10 " "$(nvpm-tool core reg "$va" 1G --inval --count 10 2>&1)"
calls "$t/loop-calls" get_pages put_pages 10
one "$t/nc-1G-contiguous" "$va" 1G get_pages_persistent put_pages_persistent
own_eq "$t/nc-1G-contiguous-one-sge" 1 "$nmap"
nvpm-tool gpu free "$va" >/dev/null
unload_stack "$t"

# The DMA device's maximum segment size bounds the SGEs: 1 MiB gives 1024
# SGEs of 1 MiB; 0 leaves the device at the PCI default of 64 KiB (restored
# by the previous unload): one SGE per page, as without coalescing.
for seg in 1048576:1024 0:16384; do
	t=max-seg-${seg%%:*}
	load_stack "$t" "max_seg_size=${seg%%:*}" "" || continue
	va=$(nvpm-tool gpu alloc 1G)
	one "$t/1G" "$va" 1G get_pages_persistent put_pages_persistent
	own_eq "$t/sges" "${seg#*:}" "$nmap"
	# Any client: no SGE longer than the device's maximum segment.
	if [ "${seg%%:*}" != 0 ]; then
		id=$(nvpm-tool core reg "$va" 1G)
		longest=$(nvpm-tool core sg "$id" | awk '$2 > m {m = $2} END {print m + 0}')
		expect_ok "$t/sges-within-max-seg" test "$longest" -le "${seg%%:*}"
		nvpm-tool core dereg "$id"
	fi
	nvpm-tool gpu free "$va" >/dev/null
	if [ "${seg%%:*}" = 0 ]; then
		# One SGE per page: exact counts around where the module's table
		# changes shape (up to 16 entries one slab object of 1 or 16 slots;
		# up to 126, one small chunk; beyond, chained large chunks of 510
		# entries and a link). In ascending order, a freed object comes back
		# with its old end mark inside the next, longer table of its class:
		# the module must have cleared it (the core simulator's walk checks
		# every SGE).
		for npages in 1 2 3 4 5 8 9 16 17 125 126 127 128 509 510 511 512 1020 1021; do
			va=$(nvpm-tool gpu alloc $((npages * 65536)))
			one "$t/$npages-pages" "$va" $((npages * 65536)) get_pages_persistent put_pages_persistent
			expect_eq "$t/$npages-pages-sges" "$npages" "$nmap"
			nvpm-tool gpu free "$va" >/dev/null
		done
	fi
	unload_stack "$t"
done
expect_dmesg max-seg-restored "dma_device 0000:00:00.0, max_seg_size 65536"
