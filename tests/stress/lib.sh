# Helpers for the stress scenarios (tests/guest/scenarios/5*-stress-*.sh),
# installed in the guest as /tests/stress-lib.sh; sourced after lib.sh and
# client-lib.sh. tests/stress/README.md.
# shellcheck shell=sh

# The scale: GUEST_ENV words (make stress-long), written to /tests/env.
# shellcheck disable=SC1091
[ ! -r /tests/env ] || . /tests/env
stress_t0=$(date +%s)

# The configurations: core generation - client layout (STRESS_CONFIGS in
# /tests/env picks some, separated by spaces or commas: tests/stress/long.sh
# boots once per configuration, make check's debug suite picks four).
: "${STRESS_CONFIGS:=modern-persistent modern-revocable modern-fallback mid-persistent mid-revocable legacy-persistent legacy-revocable}"
STRESS_CONFIGS=$(echo "$STRESS_CONFIGS" | tr , ' ')

# stress_config CFG: sets cfg_mode, cfg_gpu (GPU simulator parameters),
# cfg_params (nvidia_peermem's) and cfg_inval (the percentage of MRs that
# support invalidation in the load generators) for CFG.
# shellcheck disable=SC2034 # cfg_inval is for the scenarios
stress_config() {
	cfg_mode=${1%%-*}
	cfg_gpu="" cfg_inval=50
	cfg_params="peerdirect_support=0"
	[ "$cfg_mode" = legacy ] && cfg_params="peerdirect_support=1"
	case $1 in
	*-revocable) cfg_params="persistent_api_support=0 $cfg_params" cfg_inval=75 ;;
	*-fallback) cfg_gpu="persistent_api=0" cfg_inval=90 ;;
	esac
}

# stress_load CFG: loads the stack for CFG (load_stack, which fails when an
# old module cannot be unloaded), and confirms that it runs with CFG's
# parameters and holds no context.
stress_load() {
	stress_config "$1"
	# shellcheck disable=SC2086 # parameters are words
	load_stack "$1" "mode=$cfg_mode" "$cfg_gpu" "$cfg_params" || return 1
	sl_pas=1
	case $cfg_params in *persistent_api_support=0*) sl_pas=0 ;; esac
	sl_gpu=Y
	[ -z "$cfg_gpu" ] || sl_gpu=N
	# The anchor (ANCHOR=1) has no statistics, and the parameter only from
	# 560 on (peermem_pas); its module reference count is 0 without
	# registrations.
	if [ "${ANCHOR:-0}" = 1 ]; then
		sl_pas=$(peermem_pas "$cfg_params")
		sl_fresh() {
			{ ! pas_param || [ "$(cat /sys/module/nvidia_peermem/parameters/persistent_api_support)" = "$sl_pas" ]; } &&
				[ "$(cat /sys/module/nvidia_peermem/refcnt)" = 0 ]
		}
	else
		sl_fresh() {
			[ "$(cat /sys/module/nvidia_peermem/parameters/persistent_api_support)" = $sl_pas ] &&
				grep -q '^contexts_live 0$' "$STATS"
		}
	fi
	if [ "$(nvpm-tool core mode 2>&1)" != "$cfg_mode" ] ||
		[ "$(nvpm-tool gpu get persistent_api 2>&1)" != $sl_gpu ] || ! sl_fresh; then
		fail "$1/fresh-stack" "the stack does not run with this configuration (nvidia_peermem refcnt $(cat /sys/module/nvidia_peermem/refcnt), $(grep contexts_live "$STATS" 2>/dev/null)): configuration skipped"
		return 1
	fi
}

# stress_run NAME ARGS...: nvpm-tool stress ARGS, one assertion; its figures
# (the first line of its output) go to the serial log as NVPM-FIGURES, the
# whole output when it fails. The tool registers and deregisters from its
# one process, as an application does: the GPU simulator holds it to the
# driver's rule (process_rule=tgid: a revocable put from any other process,
# a kernel thread included, unpins nothing).
stress_run() {
	sr_name=$1
	shift
	nvpm-tool gpu set process_rule tgid
	if sr_out=$(nvpm-tool stress "$@" 2>&1); then
		pass "$sr_name"
	else
		fail "$sr_name" "$(printf '%s' "$sr_out" | tr '\n' '|')"
	fi
	nvpm-tool gpu set process_rule application
	printf '%s\n' "$sr_out" | head -n 1 | sed "s|^nvpm-tool: ||; s|^|NVPM-FIGURES $SCENARIO/$sr_name: |"
}

# stress_done: the scenario's duration, as a figure.
stress_done() {
	echo "NVPM-FIGURES $SCENARIO: $(($(date +%s) - stress_t0)) s"
}
