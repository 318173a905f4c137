# A registration and a cudaFree while the module loads (issue #32, item 2).
# MOFED's core lists a client before ib_register_peer_memory_client returns
# the handle its invalidations need; the core simulator holds that return
# (register_return_ms). Meanwhile the revocable client declines every range
# (the core's "not mine": with no other client the registration fails with
# the pin's EFAULT), so no registration exists whose invalidation would
# have nowhere to go. Once loaded, the same registration is invalidated by a
# free as always.
. /tests/lib.sh
. /tests/client-lib.sh

t=modern
for m in nvidia_peermem mofed_peer_sim nvidia; do ! loaded $m || rmmod $m; done
mark_dmesg $t
hold_ms=4000
if modprobe mofed_peer_sim mode=modern register_return_ms=$hold_ms && modprobe nvidia; then
	# persistent_api_support=0: the revocable nv_mem registers first.
	modprobe nvidia_peermem persistent_api_support=0 >/tmp/46-load.out 2>&1 &
	loader=$!
	i=0
	while [ "$(nvpm-tool core counter clients.register_held)" = 0 ] && [ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	expect_eq "$t/registration-held" 1 "$(nvpm-tool core counter clients.register_held)"
	va=$(nvpm-tool gpu alloc 1M)
	if id=$(nvpm-tool core reg "$va" 1M --inval 2>&1); then
		fail "$t/declined-while-registering" "registered as $id before the client had its handle"
		# What the decline prevents: this invalidation has nowhere to go.
		nvpm-tool gpu free "$va" >/dev/null
		expect_eq "$t/window/invalidated" 1 "$(nvpm-tool core events "$id" 2>&1)"
		nvpm-tool core dereg "$id" >/dev/null 2>&1
	else
		expect_match "$t/declined-while-registering" "\\(EFAULT\\)" "$id"
		expect_eq "$t/nothing-pinned-in-window" 0 "$(nvpm-tool gpu counter pins.live)"
		nvpm-tool gpu free "$va" >/dev/null
	fi
	if wait $loader; then pass "$t/loaded"; else fail "$t/loaded" "$(cat /tmp/46-load.out)"; fi
	expect_dmesg "$t/decline-logged" "nvidia_peermem: range at 0x[0-9a-f]+ declined: the revocable client is still registering"
	echo 0 >/sys/module/mofed_peer_sim/parameters/register_return_ms
	# Loaded: the same registration is taken and invalidated by a free.
	va=$(nvpm-tool gpu alloc 1M)
	if id=$(nvpm-tool core reg "$va" 1M --inval 2>&1); then
		pass "$t/registered-after-load"
		expect_eq "$t/free" 1 "$(nvpm-tool gpu free "$va" 2>&1)"
		expect_eq "$t/invalidated" 1 "$(nvpm-tool core events "$id" 2>&1)"
		expect_ok "$t/dereg" nvpm-tool core dereg "$id"
	else
		fail "$t/registered-after-load" "$id"
	fi
	expect_nothing_held "$t/nothing-held"
	unload_stack $t
else
	fail "$t/load" "could not load the simulators"
fi
