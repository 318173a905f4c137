# Stress, concurrency (tests/stress/README.md): 8 threads register,
# deregister and free overlapping GPU buffers (nvpm-tool stress concurrent)
# in every configuration. Registrations race cudaFree (invalidations),
# deregistrations race invalidations. Nothing may be left pinned, mapped,
# registered or accounted, no simulator may count a contract violation, and
# the GPU's, the core's and the module's counters must agree.
# make check: 100,000 operations in each configuration (all three core
# modes, persistent and revocable clients); make stress-long: STRESS_CONC_OPS
# in each. STRESS_SEED seeds the threads.
. /tests/lib.sh
. /tests/client-lib.sh
. /tests/stress-lib.sh

for cfg in $STRESS_CONFIGS; do
	stress_load "$cfg" || continue
	# shellcheck disable=SC2154 # cfg_inval: set by stress_load
	stress_run "$cfg/concurrent" concurrent --threads 8 --ops "${STRESS_CONC_OPS:-100000}" \
		--inval "$cfg_inval" --seed "${STRESS_SEED:-1}"
	unload_stack "$cfg"
done
stress_done
