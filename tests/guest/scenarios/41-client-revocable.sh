# NVIDIA's legacy layout (persistent_api_support=0): nv_mem revocable for
# MRs that support invalidation, nv_mem_nc persistent for the rest; a
# cudaFree reaches the core as an invalidation in every MOFED generation.
# The anchor runs only against the page-table ABI of its own nv-p2p.h
# (GPU_PT_ABI).
. /tests/lib.sh
. /tests/client-lib.sh

for mode in modern mid legacy; do
	for abi in ${GPU_PT_ABI:-1.2 2.0}; do
		t="$mode-$abi"
		peerdirect=0
		[ "$mode" = legacy ] && peerdirect=1
		load_stack "$t" "mode=$mode" "page_table_version=$abi" \
			"persistent_api_support=0 peerdirect_support=$peerdirect" || continue
		clients=$(nvpm-tool core clients)
		expect_match "$t/nv_mem-revocable" "^nv_mem .*invalidation=1" "$clients"
		expect_match "$t/nv_mem_nc-persistent" "^nv_mem_nc .*invalidation=0" "$clients"
		for size in 64K 2M 64M; do
			reg_and_check "$t/$size" "$size" fragmented 0 --inval
		done
		reg_and_check "$t/unaligned" 2M shuffled 12345 --inval
		# Without invalidation support the persistent nv_mem_nc takes it.
		va=$(nvpm-tool gpu alloc 2M)
		id=$(nvpm-tool core reg "$va" 2M)
		expect_eq "$t/nc-owner" nv_mem_nc "$(nvpm-tool core show "$id" client 2>&1)"
		expect_ok "$t/nc-dereg" nvpm-tool core dereg "$id"
		expect_eq "$t/nc-free" 0 "$(nvpm-tool gpu free "$va" 2>&1)"
		# cudaFree while registered: one callback, forwarded to the core.
		va=$(nvpm-tool gpu alloc 4M --layout fragmented)
		id=$(nvpm-tool core reg "$va" 4M --inval)
		expect_eq "$t/rev-owner" nv_mem "$(nvpm-tool core show "$id" client 2>&1)"
		expect_eq "$t/free-fires-callback" 1 "$(nvpm-tool gpu free "$va" 2>&1)"
		expect_eq "$t/core-invalidated" 1 "$(nvpm-tool core events "$id" 2>&1)"
		expect_ok "$t/dereg-after-invalidation" nvpm-tool core dereg "$id"
		if own_feature "$t/forwarded"; then
			expect_match "$t/forwarded" "^invalidations_forwarded [1-9]" "$(cat $STATS)"
		fi
		# Deregistration returns with the pages unpinned (BAR1 given back),
		# even when the driver's unpin is slow (every call sleeps 20 ms):
		# put_pages leaves the unpin to release, which waits for it.
		va=$(nvpm-tool gpu alloc 64M --layout fragmented)
		id=$(nvpm-tool core reg "$va" 64M --inval)
		moved=$(awk '$1 == "deferred_releases" {print $2}' "$STATS" 2>/dev/null)
		nvpm-tool gpu set cost_us 20000
		expect_ok "$t/slow-unpin-dereg" nvpm-tool core dereg "$id"
		expect_counter "$t/unpinned-at-dereg" gpu pins.live 0
		expect_counter "$t/unmapped-at-dereg" gpu mappings.live 0
		if own_feature "$t/unpin-moved-to-release"; then
			expect_match "$t/unaccounted-at-dereg" "^pinned_bytes 0$" "$(cat $STATS)"
			expect_match "$t/unpin-moved-to-release" "^deferred_releases $((moved + 1))$" "$(cat $STATS)"
		fi
		nvpm-tool gpu set cost_us 0
		expect_eq "$t/slow-unpin-free" 0 "$(nvpm-tool gpu free "$va" 2>&1)"
		# A cudaFree whose callback runs while the module is inside the
		# unpin, and a driver that then fails the put (as older ones did):
		# the callback left its reference to the unpin, which drops it.
		va=$(nvpm-tool gpu alloc 2M --layout fragmented)
		id=$(nvpm-tool core reg "$va" 2M --inval)
		cb=$(nvpm-tool gpu counter callbacks)
		nvpm-tool gpu set free_during_put 1
		nvpm-tool gpu set revoked_put_errno 22
		expect_ok "$t/free-during-put/dereg" nvpm-tool core dereg "$id"
		nvpm-tool gpu set free_during_put 0
		nvpm-tool gpu set revoked_put_errno 0
		expect_counter "$t/free-during-put/no-deadlock" gpu violation.deadlock 0
		expect_counter "$t/free-during-put/callback" gpu callbacks $((cb + 1))
		if own_feature "$t/free-during-put/no-context-left"; then
			expect_match "$t/free-during-put/no-context-left" "^contexts_live 0$" "$(cat $STATS)"
		fi
		expect_counter "$t/free-during-put/unpinned" gpu pins.live 0
		unload_stack "$t"
	done
done
