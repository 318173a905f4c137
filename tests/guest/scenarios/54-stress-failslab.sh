# Stress, allocation failures (tests/stress/README.md): every memory
# allocation made with nvidia_peermem's code on the stack fails in turn, at
# registration, invalidation and deregistration in every configuration, and
# at module load (nvpm-tool stress failslab: failslab and fail_page_alloc with
# a stack filter on the module's text, driven through
# /proc/thread-self/fail-nth). Needs the debug kernel (make check-debug): on a
# kernel without failslab the scenario only says it skipped. Leaks of the
# module's own memory are for kmemleak (GUEST_KMEMLEAK=1).
. /tests/lib.sh
. /tests/client-lib.sh
. /tests/stress-lib.sh

if [ ! -d /sys/kernel/debug/failslab ]; then
	echo "NVPM-FIGURES $SCENARIO: skipped, this kernel has no failslab (the debug kernel has: make check-debug)"
	exit 0
fi

for cfg in $STRESS_CONFIGS; do
	stress_load "$cfg" || continue
	stress_run "$cfg/allocations" failslab
	unload_stack "$cfg"
done

# The module's load: every allocation of its init fails in turn, with the
# default parameters, then with persistent_api_support=0 from shortly before
# the end of the slab caches' setup (made before the parameters matter, so
# swept in the first; the tool checks that the second starts inside it).
# STRESS_FAILSLAB_STRIDE (default 1): inside that setup (kmem_cache_create's
# own allocations) only every n-th fails; every one after it still does.
for m in nvidia_peermem mofed_peer_sim nvidia; do ! loaded $m || rmmod $m; done
modprobe mofed_peer_sim && modprobe nvidia
stress_run load failslab --init "" --then "persistent_api_support=0" \
	--setup-stride "${STRESS_FAILSLAB_STRIDE:-1}"
expect_counter "load/no-client-left" core clients.live 0
rmmod mofed_peer_sim nvidia
stress_done
