# Stress, the windows of the driver's real locking (tests/sim/README.md, "The
# GPU simulator: nvidia.ko", Locking): a cudaFree whose free callback runs,
# under the driver's API lock, at each point where a revocable registration
# meets the driver, one window at a time, in every MOFED generation:
#   map-waits-lock  the module's dma_map_pages read the table and waits for
#                   the API lock (free_during_map): the callback must not
#                   wait for the map; the registration fails and the
#                   mapping made from the freed table is never used;
#   unmap-runs      the free comes while the module's dma_unmap_pages runs
#                   (free_during_unmap): the callback waits for that unmap,
#                   as the driver frees the table when it returns;
#   put-waits       the module's put_pages waits for the API lock
#                   (free_during_put): the callback must not wait for it;
#   before-map      between the pin and the core's dma_map (free_at=dma_map);
#   pre-activation  after dma_map, while the core holds mapping_lock until
#                   the HCA activates (free_at=activate): the forwarded
#                   invalidation waits for it and lands after activation
#                   (a legacy core refuses the registration instead);
#   mapped          a registered MR; a legacy core tears it down inside the
#                   callback (dma_unmap, put_pages, release re-entered).
# Each window: nothing hangs (a wait that cannot end is a gpu deadlock
# violation within deadlock_ms), the callback ran once, the window was
# really hit (the simulator's counters say so), nothing used the table
# after the driver freed it, no other contract violation, and nothing stays
# held.
. /tests/lib.sh
. /tests/client-lib.sh
. /tests/stress-lib.sh

# window T NAME: resets the counters, marks the kernel log (an anchor bug's
# signal must show in its own window) and allocates $va (2 MiB, fragmented).
window() {
	w="$1/$2"
	mark_dmesg "$w"
	nvpm-tool gpu reset
	nvpm-tool core reset
	va=$(nvpm-tool gpu alloc 2M --layout fragmented)
}

# window_end COUNTER VALUE: the callback ran once, the GPU's COUNTER shows
# the window was hit, nothing is held; frees $va if still allocated.
window_end() {
	expect_counter "$w/no-deadlock" gpu violation.deadlock 0
	expect_counter "$w/no-use-after-free" gpu violation.use_after_free 0
	expect_counter "$w/one-callback" gpu callbacks 1
	expect_counter "$w/hit" gpu "$1" "$2"
	nvpm-tool gpu free "$va" >/dev/null 2>&1 || true
	expect_nothing_held "$w/nothing-held"
}

# reg_refused WANT ARGS...: a registration that must fail with errno WANT (a regex).
reg_refused() {
	rr_want=$1
	shift
	if rr_id=$(nvpm-tool core reg "$va" 2M --inval "$@" 2>&1); then
		fail "$w/refused" "registered as MR $rr_id"
		nvpm-tool core dereg "$rr_id"
	else
		expect_match "$w/refused" "\\(($rr_want)\\)" "$rr_id"
	fi
}

# reg_dereg_with KNOB: registers, sets the GPU's KNOB, deregisters.
reg_dereg_with() {
	if id=$(nvpm-tool core reg "$va" 2M --inval 2>&1); then
		nvpm-tool gpu set "$1" 1
		expect_ok "$w/dereg" nvpm-tool core dereg "$id"
		nvpm-tool gpu set "$1" 0
	else
		fail "$w/reg" "$id"
	fi
}

for mode in ${STRESS_WINDOW_MODES:-modern mid legacy}; do
	t=$mode-revocable
	stress_load $t || continue
	# A legacy core (MOFED <= 5.0) may refuse with EAGAIN: its notifier
	# latched the invalidation before activation. EINVAL: the driver's (or a
	# client's) answer to a freed table, which MOFED passes on.
	refused="EFAULT|EINVAL"
	[ $mode != legacy ] || refused="EFAULT|EINVAL|EAGAIN"

	window $t map-waits-lock
	nvpm-tool gpu set free_during_map 1
	reg_refused "$refused"
	nvpm-tool gpu set free_during_map 0
	window_end maps.raced 1

	window $t unmap-runs
	reg_dereg_with free_during_unmap
	window_end unmaps.in_callback 1

	window $t put-waits
	reg_dereg_with free_during_put
	window_end api.waits_on_free 1

	window $t before-map
	reg_refused "$refused" --free-at dma_map
	window_end maps.raced 0

	window $t pre-activation
	if [ $mode = legacy ]; then
		reg_refused EAGAIN --free-at activate
	elif id=$(nvpm-tool core reg "$va" 2M --inval --free-at activate 2>&1); then
		expect_eq "$w/invalidated" 1 "$(nvpm-tool core events "$id" 2>&1)"
		expect_match "$w/not-mapped" "^(invalidated|unmapped)$" "$(nvpm-tool core state "$id" 2>&1)"
		expect_ok "$w/dereg" nvpm-tool core dereg "$id"
	else
		fail "$w/reg" "$id"
	fi
	window_end maps.raced 0

	window $t mapped
	if id=$(nvpm-tool core reg "$va" 2M --inval 2>&1); then
		expect_eq "$w/free" 1 "$(nvpm-tool gpu free "$va" 2>&1)"
		expect_eq "$w/invalidated" 1 "$(nvpm-tool core events "$id" 2>&1)"
		if [ $mode = legacy ]; then
			expect_eq "$w/released-inside" released "$(nvpm-tool core state "$id" 2>&1)"
		fi
		expect_ok "$w/dereg" nvpm-tool core dereg "$id"
	else
		fail "$w/reg" "$id"
	fi
	window_end maps.raced 0
	unload_stack $t
done
stress_done
