# Stress, random sequences (tests/stress/README.md): a seeded
# sequence of alloc, free, reg (random ranges, flags, bad ranges), dereg and
# cudaFree of registered buffers, with provider failures injected now and
# then (nvpm-tool stress random --faults), checked against a model of the
# stack after every STRESS_RANDOM_CHECK operations and at the end: SG lists
# against the GPU's DMA addresses, every MR's state, every counter, nothing
# left. A failure prints the seed and the command that replays it.
# STRESS_RANDOM_OPS sets the operations per configuration (make check: 3,000
# in each of 7), STRESS_SEED the first seed (configuration n uses seed + n).
. /tests/lib.sh
. /tests/client-lib.sh
. /tests/stress-lib.sh

# The model's injected pin failures are those of a client that pins in
# acquire (this module): the anchor runs the sequences without them (52
# injects every provider failure into it).
seed=${STRESS_SEED:-1}
faults=--faults
own_feature random-faults || faults=""
for cfg in $STRESS_CONFIGS; do
	stress_load "$cfg" || continue
	stress_run "$cfg/random" random --seed "$seed" --ops "${STRESS_RANDOM_OPS:-3000}" \
		--check-every "${STRESS_RANDOM_CHECK:-500}" $faults
	seed=$((seed + 1))
	unload_stack "$cfg"
done
stress_done
