# A cudaFree racing a registration, at each point of its life (and between
# the two steps of its deregistration), in every
# MOFED generation: the invalidation is never dropped (the registration fails
# or ends invalidated), nothing is touched after the driver revoked it (the
# GPU simulator counts any use after free), and nothing stays pinned.
# A refused registration fails with EFAULT (declined), EAGAIN (a legacy core
# saw the invalidation before activation) or EINVAL (the driver's answer to
# a pin of a freed range, which MOFED passes on from get_pages or dma_map).
# On a KASAN kernel (the GPU simulator frees revoked tables for real), no
# KASAN report at the load, in each stage or in the invalidation of a mapped
# registration: no stale read of a table, of the client's own context.
. /tests/lib.sh
. /tests/client-lib.sh

for mode in modern mid legacy; do
	t=$mode
	peerdirect=0
	[ $mode = legacy ] && peerdirect=1
	load_stack $t "mode=$mode" "" "persistent_api_support=0 peerdirect_support=$peerdirect" || continue
	expect_no_kasan "$t/load/no-kasan-report"
	for stage in get_pages dma_map put_pages destroy_mkey; do
		n="$t/free-before-$stage"
		mark_dmesg "$n"
		va=$(nvpm-tool gpu alloc 2M --layout fragmented)
		cb0=$(nvpm-tool gpu counter callbacks)
		if id=$(nvpm-tool core reg "$va" 2M --inval --free-at $stage 2>&1); then
			if [ $stage = put_pages ] || [ $stage = destroy_mkey ]; then
				expect_eq "$n/mapped-before-dereg" mapped "$(nvpm-tool core state "$id" 2>&1)"
			else
				# Registered before the callback got to the client: then it
				# must have been invalidated, not left mapped on freed memory.
				expect_eq "$n/invalidated" 1 "$(nvpm-tool core events "$id" 2>&1)"
			fi
			expect_ok "$n/dereg" nvpm-tool core dereg "$id"
			# A mid core unpins under mapping_lock, which the callback's
			# invalidation waits for (bug 2696789): a client must not wait
			# for its unpin in the callback, nor unpin inside that lock.
			expect_counter "$n/no-deadlock" gpu violation.deadlock 0
		else
			if [ $stage = put_pages ] || [ $stage = destroy_mkey ]; then
				fail "$n/reg" "$id"
			else
				expect_match "$n/reg-refused" "\\((EFAULT|EAGAIN|EINVAL)\\)" "$id"
			fi
		fi
		expect_no_kasan "$n/no-kasan-report"
		# One callback for the client's pin. Before get_pages, only a client
		# that pins in acquire holds one: 0 is right for one that pins in
		# get_pages. Between the deregistration's two steps (destroy_mkey:
		# after dma_unmap and put_pages, before release), only a client
		# that unpins in release.
		cbs=$(($(nvpm-tool gpu counter callbacks) - cb0))
		if [ $stage = get_pages ] || [ $stage = destroy_mkey ]; then
			expect_match "$n/at-most-one-callback" "^[01]$" "$cbs"
		else
			expect_eq "$n/one-callback" 1 "$cbs"
		fi
		expect_nothing_held "$n/nothing-held"
	done
	# The registration the core holds when the free comes is invalidated.
	mark_dmesg "$t/mapped"
	va=$(nvpm-tool gpu alloc 1M)
	id=$(nvpm-tool core reg "$va" 1M --inval)
	expect_eq "$t/mapped/free" 1 "$(nvpm-tool gpu free "$va" 2>&1)"
	expect_eq "$t/mapped/invalidated" 1 "$(nvpm-tool core events "$id" 2>&1)"
	expect_ok "$t/mapped/dereg" nvpm-tool core dereg "$id"
	expect_nothing_held "$t/mapped/nothing-held"
	expect_no_kasan "$t/mapped/no-kasan-report"
	unload_stack $t
done
