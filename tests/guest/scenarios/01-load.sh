# The module loads by both names, shows its version and parameters, refuses
# bad parameter values, and unloads cleanly. In the anchor suite (NVIDIA's
# module) the checks of this module's banner and log lines are skipped
# (own_feature), and those of persistent_api_support run where the anchor
# has it (560 and later: pas_param). BUILT_P2P_ABI (/tests/env): the page
# tables' major version the module was built for: 2 from src/ffi's nv-p2p.h,
# 1 where the build found a 1.x driver's header (tests/neighbours).
. /tests/lib.sh
M=/sys/module/nvidia_peermem
V=$(cat /tests/expected-version)

expect_ok modprobe-dash modprobe nvidia-peermem
expect_eq version "$V" "$(cat $M/version 2>&1)"
if own_feature banner; then
	expect_dmesg banner "nvidia_peermem: version $V loaded"
	expect_dmesg banner-core "nvidia_peermem: version $V loaded: .*; peer-memory core mofed_peer_sim, _ex client layout"
	expect_dmesg banner-p2p-abi "nvidia_peermem: version $V loaded: .*built for NVIDIA P2P page tables ${BUILT_P2P_ABI:-2}\.x"
fi
if pas_param persistent-param; then
	expect_eq persistent-default 1 "$(cat $M/parameters/persistent_api_support 2>&1)"
	expect_eq persistent-mode 444 "$(stat -c %a $M/parameters/persistent_api_support 2>&1)"
fi
expect_eq peerdirect-default 0 "$(cat $M/parameters/peerdirect_support 2>&1)"
expect_eq peerdirect-mode 444 "$(stat -c %a $M/parameters/peerdirect_support 2>&1)"
expect_eq version-mode 444 "$(stat -c %a $M/version 2>&1)"
expect_fail param-read-only sh -c "echo 1 > $M/parameters/peerdirect_support"
# E (unsigned) only where the kernel has module signing: Debian's, not the debug kernel.
taint="(O)"
[ ! -e /sys/module/module/parameters/sig_enforce ] || taint="(OE)"
expect_eq taint-only-OE "$taint" "$(sed -n 's/^nvidia_peermem .* \(([A-Z]*)\)$/\1/p' /proc/modules)"
expect_ok rmmod rmmod nvidia_peermem
if loaded nvidia_peermem; then fail unloaded "still in /sys/module"; else pass unloaded; fi
if own_feature unload-line; then expect_dmesg unload-line "nvidia_peermem: unloaded"; fi

expect_ok modprobe-underscore modprobe nvidia_peermem
expect_ok rmmod-2 rmmod nvidia_peermem

params=$(peermem_params "persistent_api_support=0 peerdirect_support=1")
# shellcheck disable=SC2086 # parameters are words
expect_ok modprobe-params modprobe nvidia_peermem $params
if pas_param persistent-set; then expect_eq persistent-set 0 "$(cat $M/parameters/persistent_api_support 2>&1)"; fi
expect_eq peerdirect-set 1 "$(cat $M/parameters/peerdirect_support 2>&1)"
if own_feature banner-legacy-layout; then
	expect_dmesg banner-legacy-layout "nvidia_peermem: version $V loaded: clients nv_mem and nv_mem_nc .*legacy client layout"
fi
expect_ok rmmod-3 rmmod nvidia_peermem

bads="peerdirect_support=abc peerdirect_support=7"
if pas_param refused-persistent_api_support; then bads="persistent_api_support=2 persistent_api_support=-1 $bads"; fi
for bad in $bads; do
	expect_fail "refused-$bad" modprobe nvidia_peermem "$bad"
	if loaded nvidia_peermem; then fail "not-loaded-$bad" "loaded anyway"; rmmod nvidia_peermem; else pass "not-loaded-$bad"; fi
	if own_feature "message-$bad"; then
		expect_dmesg "message-$bad" "nvidia_peermem: invalid value '${bad#*=}' for parameter ${bad%%=*}"
	fi
done

# The kernel's own RDMA stack (Debian's ib_core) has no peer-memory API: the
# load fails with ENOPKG and a line saying what to install, not with
# "Unknown symbol" (the API is linked weakly). NVIDIA's module links it
# strongly: its "Unknown symbol" lines would fail the log check.
own_feature no-peer-api || exit 0
sim_unload
expect_ok gpu-only modprobe nvidia
expect_ok inbox-ib_core modprobe ib_core
out=$(insmod "/lib/modules/$(uname -r)/extra/nvidia_peermem.ko" 2>&1)
expect_match no-peer-api-refused "Package not installed" "$out"
if loaded nvidia_peermem; then fail no-peer-api-not-loaded "loaded anyway"; rmmod nvidia_peermem; else pass no-peer-api-not-loaded; fi
expect_dmesg no-peer-api-message "nvidia_peermem: the running RDMA stack has no peer-memory API .*MLNX_OFED or DOCA-OFED"
if dmesg | grep -q "nvidia_peermem: Unknown symbol"; then fail no-unknown-symbol "Unknown symbol logged"; else pass no-unknown-symbol; fi
rmmod nvidia
