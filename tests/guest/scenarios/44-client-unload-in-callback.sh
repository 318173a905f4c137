# rmmod racing a free callback that holds the last reference to its
# registration (issue #32, item 1). A legacy core (MOFED <= 5.0) releases
# the registration inside the invalidation the callback forwards, so the
# callback then drops the last reference, and with it the module's: rmmod
# may start while the callback is still returning through the module's
# text. The GPU simulator holds the free path after the callback returned
# (callback_return_ms, the driver thread "still returning"); the module's
# exit must not finish before the free path went on (the simulator's
# unloaded_in_callback violation, checked when the exit is done), and rmmod
# returns only once it has.
. /tests/lib.sh
. /tests/client-lib.sh

t=legacy
if load_stack $t "mode=legacy" "" "persistent_api_support=0 peerdirect_support=1"; then
	hold_ms=3000
	va=$(nvpm-tool gpu alloc 1M)
	id=$(nvpm-tool core reg "$va" 1M --inval)
	expect_eq "$t/mapped" mapped "$(nvpm-tool core state "$id" 2>&1)"
	expect_ok "$t/hold" nvpm-tool gpu set callback_return_ms $hold_ms
	held0=$(nvpm-tool gpu counter callbacks.return_held)
	cb0=$(nvpm-tool gpu counter callbacks)
	nvpm-tool gpu free "$va" >/tmp/44-free.out 2>&1 &
	freer=$!
	# Until the callback has returned and the free path holds.
	i=0
	while [ "$(nvpm-tool gpu counter callbacks.return_held)" = "$held0" ] && [ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	expect_eq "$t/callback-returned" $((held0 + 1)) "$(nvpm-tool gpu counter callbacks.return_held)"
	# The core released the registration inside the callback: the callback
	# dropped the last reference, so nothing keeps the module loaded.
	expect_match "$t/no-live-contexts" "^contexts_live 0$" "$(cat $STATS)"
	expect_eq "$t/no-module-reference" 0 "$(cat /sys/module/nvidia_peermem/refcnt)"
	expect_ok "$t/rmmod" rmmod nvidia_peermem
	# rmmod returned only after the driver went past the callback.
	expect_eq "$t/rmmod-waited-for-the-callback" $((cb0 + 1)) "$(nvpm-tool gpu counter callbacks)"
	wait $freer
	expect_eq "$t/free" 1 "$(cat /tmp/44-free.out)"
	expect_counter "$t/not-unloaded-in-callback" gpu violation.unloaded_in_callback 0
	nvpm-tool gpu set callback_return_ms 0
	# The application's deregistration: the core released it already.
	expect_ok "$t/dereg" nvpm-tool core dereg "$id"
	expect_nothing_held "$t/nothing-held"
	expect_ok "$t/clean" nvpm-tool expect-clean
	expect_ok "$t/rmmod-sims" rmmod mofed_peer_sim nvidia
fi
