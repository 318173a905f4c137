# Stress, provider failures (tests/stress/README.md): every
# nvidia_p2p_* call of a workload of registrations, a cudaFree and
# deregistrations fails in turn (nvpm-tool stress faults), in every
# configuration. A failed pin is a decline, a failed dma_map_pages reaches the
# core with its errno, a failed unmap changes nothing; nothing leaks, nothing
# crashes, no contract violation. A failed put_pages leaves the pin held by
# the driver (as the real driver does); the module must then keep the context
# that the pin's free callback would be called with (put-failures).
. /tests/lib.sh
. /tests/client-lib.sh
. /tests/stress-lib.sh

# faults_unload NAME: unloads the stack. Buffers whose pins the driver kept
# after a failed put are only freed if the module kept their contexts (it
# refuses rmmod then): freeing them otherwise would call back into freed
# memory. The GPU simulator drops what is left when it unloads.
faults_unload() {
	if ! rmmod nvidia_peermem 2>/dev/null; then
		for va in $(nvpm-tool gpu buffers | awk '$4 == "allocated" { print $1 }'); do
			nvpm-tool gpu free "$va" >/dev/null
		done
		sleep 1
		expect_ok "$1/rmmod" rmmod nvidia_peermem
	fi
	expect_ok "$1/rmmod-sims" rmmod mofed_peer_sim nvidia
}

for cfg in $STRESS_CONFIGS; do
	stress_load "$cfg" || continue
	stress_run "$cfg/provider-calls" faults --funcs get_pages,get_pages_persistent,dma_map_pages,dma_unmap_pages
	expect_ok "$cfg/clean" nvpm-tool expect-clean
	stress_run "$cfg/put-failures" faults --funcs put_pages,put_pages_persistent
	faults_unload "$cfg"
done
stress_done
