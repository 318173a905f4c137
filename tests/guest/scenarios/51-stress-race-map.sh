# Stress, a race found by the concurrency run (55-stress-concurrent): a
# cudaFree whose free callback completes while the module is inside
# nvidia_p2p_dma_map_pages for the same pin. The real driver frees the page
# table when the callback returns, so the module must never hand the driver
# a table it may have freed. gpu_sim's free_during_map hook makes the race
# deterministic: dma_map_pages first frees the buffer from another thread and
# waits up to a second for the callback to return. A modern or mid core
# blocks the invalidation on the MR's mapping_lock until the registration is
# over; a legacy core (MOFED <= 5.0) does not, so there the callback completes
# first. Either way the registration must fail (EFAULT, or EAGAIN from a
# legacy core), the GPU must see no use of a freed table, nothing stays held.
. /tests/lib.sh
. /tests/client-lib.sh
. /tests/stress-lib.sh

for mode in modern mid legacy; do
	t=$mode-revocable
	stress_load $t || continue
	nvpm-tool gpu reset
	nvpm-tool gpu set free_during_map 1
	va=$(nvpm-tool gpu alloc 2M --layout fragmented)
	if id=$(nvpm-tool core reg "$va" 2M --inval 2>&1); then
		fail "$t/free-during-map/refused" "registered as MR $id"
		nvpm-tool core dereg "$id"
	else
		want=EFAULT
		[ $mode != legacy ] || want="EFAULT|EAGAIN"
		expect_match "$t/free-during-map/refused" "\\(($want)\\)" "$id"
	fi
	nvpm-tool gpu set free_during_map 0
	expect_counter "$t/free-during-map/no-use-after-free" gpu violation.use_after_free 0
	expect_counter "$t/free-during-map/one-callback" gpu callbacks 1
	# The use after free (if any) was reported above; what follows is about leaks.
	nvpm-tool gpu reset
	expect_nothing_held "$t/free-during-map/nothing-held"
	unload_stack $t
done
stress_done
