# nvidia-peermem-doctor (src/doctor, /usr/bin in the guest) against the live
# kernel: Debian's real ib_core, the module, and the simulators (nvidia.ko
# exports nvidia_p2p_*, mofed_peer_sim.ko the peer-memory API). Its JSON
# (flattened below) and its table must say what /sys, /proc and debugfs say:
# the module's version, parameters and counters (after a registration and
# after its deregistration), who exports the two APIs, no conflict; then
# the module unloaded (blocked, exit 1), an NVIDIA-style modprobe rule and
# an NVIDIA-built nvidia-peermem.ko under /lib/modules (conflicts, exit 1),
# and `service nv_peer_mem doctor` running it.
# shellcheck shell=sh disable=SC2016 # backquotes and $CMDLINE_OPTS are text
# shellcheck source=/dev/null
. /tests/lib.sh
# shellcheck source=/dev/null
. /tests/client-lib.sh
V=$(cat /tests/expected-version)
D=nvidia-peermem-doctor
KREL=$(uname -r)
J=/tmp/doctor.json
F=/tmp/doctor.flat

if ! command -v $D >/dev/null; then
	fail present "$D is not in the guest (make tool builds it, run.sh copies it)"
	exit 0
fi
pass present

# The doctor's pretty JSON as "path=value" lines: keys joined by dots, array
# items numbered from 0, strings unquoted, {} and [] for empty ones.
flatten() {
	awk '
	function path(k,   p, i) { p = ""; for (i = 2; i <= d; i++) p = p st[i] "."; return p k }
	{
		line = $0; sub(/^[ \t]*/, "", line); sub(/,$/, "", line); key = ""
		if (match(line, /^"[^"]*": /)) { key = substr(line, 2, RLENGTH - 4); line = substr(line, RLENGTH + 1) }
		else if (d > 0 && arr[d]) key = idx[d]++
		if (line == "{" || line == "[") { d++; st[d] = key; arr[d] = (line == "["); idx[d] = 0; next }
		if (line == "}" || line == "]") { d--; next }
		if (line ~ /^".*"$/) line = substr(line, 2, length(line) - 2)
		print path(key) "=" line
	}'
}

# doctor_json: runs `$D --json`; the exit status in $drc, the flat lines in $F.
doctor_json() {
	$D --json >$J 2>/tmp/doctor.err
	drc=$?
	flatten <$J >$F
}
# jv PATH: one value of the last run (empty when absent).
jv() { awk -v k="$1=" 'index($0, k) == 1 { print substr($0, length(k) + 1); exit }' $F; }
# jc ID FIELD: a field (status, summary, detail, fix) of check ID.
jc() {
	jc_n=$(awk -v id="$1" -F= '$1 ~ /^checks\.[0-9]+\.id$/ && $2 == id { split($1, p, "."); print p[2]; exit }' $F)
	[ -n "$jc_n" ] && jv "checks.$jc_n.$2"
}
# statuses: every check as ID=STATUS, in report order, on one line.
statuses() { awk -F= '$1 ~ /\.id$/ { id = $2 } $1 ~ /\.status$/ { printf "%s%s=%s", sep, id, $2; sep = " " }' $F; }
# expect_stats_match NAME: every counter of the stats file is in the JSON with its value.
expect_stats_match() {
	esm=""
	while read -r name value; do
		[ "$(jv "stats.$name")" = "$value" ] || esm="$esm $name=$value/json:$(jv "stats.$name")"
	done <"$STATS"
	if [ -z "$esm" ]; then pass "$1"; else fail "$1" "differs:$esm"; fi
}

# The guest has no kernel configuration (no /boot, no IKCONFIG_PROC, no
# headers) and no securityfs mounted: the kernel.* checks can tell only that
# modules load; the rest is unknown, which is INFO.
KERNEL_STATUSES="kernel.modules=OK kernel.rust=INFO kernel.toolchain=INFO kernel.headers=INFO kernel.signing=INFO"

expect_eq version "$D $V" "$($D --version 2>&1)"
expect_eq version-V "$D $V" "$($D -V 2>&1)"

# --- nothing loaded: Debian's ib_core alone (no PeerDirect) --------------------------
! loaded nvidia_peermem || rmmod nvidia_peermem
sim_unload
loaded ib_core && had_ib_core=1 || had_ib_core=
modprobe ib_core
doctor_json
t=bare
expect_eq $t/exit 1 "$drc"
expect_eq $t/stderr "" "$(cat /tmp/doctor.err)"
expect_eq $t/json-exit_status 1 "$(jv exit_status)"
expect_eq $t/json-version "$V" "$(jv version)"
expect_eq $t/verdict blocked "$(jv verdict)"
expect_eq $t/kernel "$KREL" "$(jv facts.kernel_release)"
expect_eq $t/module-loaded false "$(jv facts.module.loaded)"
expect_eq $t/module-installed extra/nvidia_peermem.ko "$(jv facts.module.installed.0)"
expect_eq $t/loaded-summary "nvidia_peermem is not loaded (installed for kernel $KREL: extra/nvidia_peermem.ko)" "$(jc module.loaded summary)"
expect_eq $t/driver-not-loaded false "$(jv facts.nvidia_driver.loaded)"
expect_eq $t/p2p-none "[]" "$(jv facts.p2p_exporters)"
expect_eq $t/provider-none null "$(jv facts.peer_memory_provider)"
expect_eq $t/stats-null null "$(jv stats)"
expect_match $t/statuses "^$KERNEL_STATUSES module.loaded=FAIL module.params=INFO module.stats=INFO module.build=(OK|INFO) conflict.nv_peer_mem=OK conflict.bundled=OK conflict.modprobe=OK nvidia.driver=FAIL nvidia.p2p=FAIL rdma.peer_symbols=FAIL " "$(statuses)"
expect_match $t/inbox-rdma "is absent: the loaded RDMA stack is the inbox one, without PeerDirect" "$(jc rdma.peer_symbols summary)"
expect_eq $t/gdr FAIL "$(jc gdr.detection status)"

# --- the stack, with each client layout ----------------------------------------------
for layout in default persistent0; do
	t=$layout
	if [ $layout = default ]; then params="" persistent=1 mode="persistent nv_mem, revocable nv_mem_fallback behind it"; else
		params="persistent_api_support=0" persistent=0 mode="revocable nv_mem plus persistent nv_mem_nc"; fi
	load_stack "$t" "" "" "$params" || continue
	doctor_json
	# The guest has no GPU and no RDMA device: those two WARN, nothing else.
	expect_eq $t/exit 0 "$drc"
	expect_eq $t/verdict degraded "$(jv verdict)"
	expect_eq $t/statuses "$KERNEL_STATUSES module.loaded=OK module.params=OK module.stats=OK module.build=OK conflict.nv_peer_mem=OK conflict.bundled=OK conflict.modprobe=OK nvidia.driver=OK nvidia.p2p=OK rdma.peer_symbols=OK rdma.devices=WARN gpu.devices=WARN gpu.bar1=INFO pci.topology=INFO pci.acs=INFO iommu.mode=OK gdr.detection=OK nvidia.settings=INFO dmabuf.kernel=INFO dmabuf.gpu=INFO nccl.paths=INFO cluster.view=OK gdr.path=INFO" "$(statuses)"
	expect_eq $t/module-loaded true "$(jv facts.module.loaded)"
	expect_eq $t/module-version "$V" "$(jv facts.module.version)"
	expect_eq $t/module-version-sysfs "$(cat /sys/module/nvidia_peermem/version)" "$(jv facts.module.version)"
	expect_eq $t/module-initstate live "$(jv facts.module.initstate)"
	expect_eq $t/module-not-nvidias false "$(jv facts.module.nvidia_bundled)"
	expect_eq $t/param-persistent "$persistent" "$(jv facts.module.parameters.persistent_api_support)"
	expect_eq $t/param-peerdirect 0 "$(jv facts.module.parameters.peerdirect_support)"
	expect_eq $t/params-summary "persistent_api_support=$persistent ($mode), peerdirect_support=0" "$(jc module.params summary)"
	expect_eq $t/loaded-summary "nvidia_peermem $V is loaded" "$(jc module.loaded summary)"
	expect_eq $t/driver-loaded true "$(jv facts.nvidia_driver.loaded)"
	expect_eq $t/driver-version "$(cat /sys/module/nvidia/version)" "$(jv facts.nvidia_driver.version)"
	expect_eq $t/driver-summary "NVIDIA driver $(cat /sys/module/nvidia/version) is loaded" "$(jc nvidia.driver summary)"
	expect_eq $t/p2p-exporter nvidia "$(jv facts.p2p_exporters.0)"
	expect_eq $t/p2p-one-exporter "" "$(jv facts.p2p_exporters.1)"
	n=$(awk '$3 ~ /^nvidia_p2p_/ && $4 == "[nvidia]" { print $3 }' /proc/kallsyms | sort -u | wc -l)
	expect_match $t/p2p-count "^[1-9]" "$n"
	expect_eq $t/p2p-summary "$n nvidia_p2p_* functions exported by [nvidia]" "$(jc nvidia.p2p summary)"
	expect_eq $t/provider mofed_peer_sim "$(jv facts.peer_memory_provider)"
	expect_eq $t/provider-summary "ib_register_peer_memory_client is exported by mofed_peer_sim" "$(jc rdma.peer_symbols summary)"
	expect_eq $t/no-conflict-loaded "[]" "$(jv facts.conflicts.loaded)"
	expect_eq $t/no-conflict-installed "[]" "$(jv facts.conflicts.installed)"
	expect_eq $t/gdr-summary "peer memory detected by NCCL: yes, by UCX: yes" "$(jc gdr.detection summary)"
	expect_eq $t/stats-fresh "0 0 0" "$(jv stats.contexts_live) $(jv stats.registrations) $(jv stats.pinned_bytes)"
	expect_stats_match $t/stats-as-debugfs

	# A live registration: the counters move, the doctor reads them.
	va=$(nvpm-tool gpu alloc 2M)
	if id=$(nvpm-tool core reg "$va" 2M 2>&1); then pass $t/reg; else fail $t/reg "$id"; fi
	doctor_json
	expect_eq $t/live-context 1 "$(jv stats.contexts_live)"
	expect_eq $t/live-registrations 1 "$(jv stats.registrations)"
	expect_eq $t/live-pinned 2097152 "$(jv stats.pinned_bytes)"
	expect_eq $t/live-summary "13 counters, no errors (contexts_live=1 pinned_bytes=2097152 registrations=1)" "$(jc module.stats summary)"
	expect_stats_match $t/live-stats-as-debugfs
	expect_match $t/live-table "^OK +module.stats +13 counters, no errors \\(contexts_live=1 pinned_bytes=2097152 registrations=1\\)$" "$($D)"
	expect_ok $t/dereg nvpm-tool core dereg "$id"
	expect_nothing_held $t/dereg-clean
	doctor_json
	expect_eq $t/after-dereg "0 1 1 0" "$(jv stats.contexts_live) $(jv stats.registrations) $(jv stats.deregistrations) $(jv stats.pinned_bytes)"
	expect_stats_match $t/after-stats-as-debugfs

	# A provider failure: an error counter turns module.stats into WARN, with the hint.
	nvpm-tool gpu inject get_pages 1 12
	nvpm-tool gpu inject get_pages_persistent 1 12
	if id=$(nvpm-tool core reg "$va" 2M 2>&1); then nvpm-tool core dereg "$id"; fi
	nvpm-tool gpu inject off
	doctor_json
	errs=$(sed -n 's/^errors_acquire //p' "$STATS")
	expect_match $t/errors-counted "^[1-9]" "$errs"
	expect_eq $t/errors-json "$errs" "$(jv stats.errors_acquire)"
	expect_eq $t/errors-warn WARN "$(jc module.stats status)"
	expect_eq $t/errors-summary "error counters are non-zero: errors_acquire=$errs" "$(jc module.stats summary)"
	expect_match $t/errors-hint "GPU BAR1 space exhausted" "$(jc module.stats fix)"
	expect_eq $t/errors-exit 0 "$drc"
	nvpm-tool gpu free "$va" >/dev/null

	# The table: the same findings for people.
	table=$($D)
	expect_eq $t/table-exit 0 "$?"
	expect_match $t/table-header "^nvidia-peermem-doctor $V: GPUDirect RDMA checks \\(root /\\)$" "$(printf '%s\n' "$table" | head -n1)"
	expect_match $t/table-loaded "^OK +module.loaded +nvidia_peermem $V is loaded$" "$table"
	expect_match $t/table-params "^OK +module.params +persistent_api_support=$persistent " "$table"
	expect_match $t/table-provider "^OK +rdma.peer_symbols +ib_register_peer_memory_client is exported by mofed_peer_sim$" "$table"
	expect_match $t/table-stats-warn "^WARN +module.stats +error counters are non-zero: errors_acquire=$errs$" "$table"
	expect_match $t/table-result "^Result: degraded \\(0 blocking, 3 warnings\\), exit status 0$" "$table"
	expect_match $t/verbose-detail "^ +- /sys/module/nvidia_peermem/version: $V$" "$($D --verbose)"
	unload_stack "$t"
done

# --- the module unloaded, the simulators still there: blocked ----------------------------
load_stack unloaded "" "" "" || exit 0
rmmod nvidia_peermem
doctor_json
t=unloaded
expect_eq $t/exit 1 "$drc"
expect_eq $t/verdict blocked "$(jv verdict)"
expect_eq $t/module FAIL "$(jc module.loaded status)"
expect_eq $t/summary "nvidia_peermem is not loaded (installed for kernel $KREL: extra/nvidia_peermem.ko)" "$(jc module.loaded summary)"
expect_match $t/fix "^\`modprobe nvidia_peermem\`" "$(jc module.loaded fix)"
expect_eq $t/gdr FAIL "$(jc gdr.detection status)"
expect_eq $t/driver-still OK "$(jc nvidia.driver status)"
expect_eq $t/provider-still mofed_peer_sim "$(jv facts.peer_memory_provider)"
expect_eq $t/stats-null null "$(jv stats)"
table=$($D)
expect_eq $t/table-exit 1 "$?"
expect_match $t/table-fail "^FAIL +module.loaded +nvidia_peermem is not loaded " "$table"
expect_match $t/table-result "^Result: blocked \\(2 blocking, 2 warnings\\), exit status 1$" "$table"

# --- conflicts, with the module loaded ------------------------------------------------
expect_ok conflict/modprobe-module modprobe nvidia_peermem
# Debian's NVIDIA driver packages: `modprobe nvidia-peermem` loads theirs.
[ -d /etc/modprobe.d ] && had_modprobe_d=1 || had_modprobe_d=
mkdir -p /etc/modprobe.d
printf 'install nvidia-peermem modprobe nvidia ; modprobe -i nvidia-current-peermem $CMDLINE_OPTS\n' >/etc/modprobe.d/nvidia.conf
doctor_json
t=conflict-rule
expect_eq $t/exit 1 "$drc"
expect_eq $t/status FAIL "$(jc conflict.modprobe status)"
expect_eq $t/summary "/etc/modprobe.d/nvidia.conf: \`modprobe nvidia-peermem\` loads nvidia_current_peermem instead of this module" "$(jc conflict.modprobe summary)"
expect_eq $t/only-fail "conflict.modprobe=FAIL" "$(statuses | tr ' ' '\n' | grep FAIL | tr '\n' ' ' | sed 's/ $//')"
rm -f /etc/modprobe.d/nvidia.conf
[ -n "$had_modprobe_d" ] || rmdir /etc/modprobe.d

# NVIDIA's own module file under the same module name (a .run install):
# depmod indexes it; the doctor names it and says what modprobe would load,
# as kmod's modinfo does.
B=/lib/modules/$KREL/kernel/drivers/video/nvidia-peermem.ko
mkdir -p "${B%/*}"
cp "/lib/modules/$KREL/extra/mofed_peer_sim.ko" "$B" # any module file not built by this project
depmod -a >/tmp/depmod.out 2>&1 # the log check would take its warnings for the kernel's
doctor_json
t=conflict-bundled
expect_eq $t/exit 1 "$drc"
expect_eq $t/status FAIL "$(jc conflict.bundled status)"
expect_match $t/summary "^NVIDIA's bundled peermem is installed \\(kernel/drivers/video/nvidia-peermem.ko\\) and " "$(jc conflict.bundled summary)"
expect_eq $t/fact kernel/drivers/video/nvidia-peermem.ko "$(jv facts.conflicts.installed.0)"
target=$(modinfo -F filename nvidia_peermem 2>&1 | sed "s|^.*/modules/$KREL/||")
expect_match $t/as-kmod "modules.dep: \`modprobe nvidia_peermem\` loads $target" "$(jc conflict.bundled detail)"
expect_eq $t/module-still-ours OK "$(jc module.loaded status)"
rm -f "$B"
depmod -a >/tmp/depmod.out 2>&1
doctor_json
expect_eq $t/removed OK "$(jc conflict.bundled status)"
expect_eq $t/removed-exit 0 "$drc"

# --- `service nv_peer_mem doctor`: the package's service runs the doctor ---------------
P=/tests/pkgroot
mkdir -p /etc/init.d /usr/lib/nvidia-peer-memory
cp $P/etc/init.d/nv_peer_mem /etc/init.d/
cp $P/usr/lib/nvidia-peer-memory/nv_peer_mem /usr/lib/nvidia-peer-memory/
ln -sf /usr/bin/dash /usr/bin/sh # Debian's service is a dash script
out=$(service nv_peer_mem doctor --json 2>&1)
expect_eq service/exit 0 "$?"
$D --json >/tmp/direct.json
expect_eq service/same-json "$(cat /tmp/direct.json)" "$out"
rmmod nvidia_peermem
out=$(service nv_peer_mem doctor 2>&1)
expect_eq service/unloaded-exit 1 "$?"
expect_match service/unloaded-table "^FAIL +module.loaded +nvidia_peermem is not loaded " "$out"
ln -sf /bin/busybox /usr/bin/sh
rm -rf /etc/init.d/nv_peer_mem /usr/lib/nvidia-peer-memory

expect_ok clean nvpm-tool expect-clean
expect_ok rmmod-sims rmmod mofed_peer_sim nvidia
[ -n "$had_ib_core" ] || rmmod ib_core
