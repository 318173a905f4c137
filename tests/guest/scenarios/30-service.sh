# The nv_peer_mem service and the modprobe rules, as the packages install
# them (make install-utils, staged by run.sh in /tests/pkgroot), on the real
# kernel with the real kmod: `service nv_peer_mem start|status|stop`,
# modprobe loading ib_core (the softdep) and nvidia first, our install rule
# winning over an NVIDIA-style one that would load the driver's own
# nvidia-peermem, and start and restart leaving the module as it is with
# ONBOOT=no.
# The GPU driver: when the guest has a module named nvidia (a simulator),
# the default prerequisites (ib_core nvidia) are used; otherwise the test
# first checks that start refuses for lack of nvidia, then sets
# PREREQ_MODULES=ib_core in the settings file and says so.
# shellcheck shell=sh disable=SC2016
# shellcheck source=/dev/null
. /tests/lib.sh
V=$(cat /tests/expected-version)
P=/tests/pkgroot
CONF=/etc/infiniband/nv_peer_mem.conf

if [ ! -x $P/etc/init.d/nv_peer_mem ] || [ ! -x /usr/sbin/service ]; then
	fail staged "run.sh did not stage the packaging files"
	exit 0
fi
loaded ib_core && had_ib_core=1 || had_ib_core=
loaded nvidia && had_nvidia=1 || had_nvidia=
cp -a $P/. /
pass installed
# Debian's /bin/sh is dash; busybox sh would run its own modprobe applet
# instead of kmod's. Restored at the end.
ln -sf /usr/bin/dash /usr/bin/sh
K=/usr/sbin # kmod's modprobe, rmmod, modinfo

# runs `service nv_peer_mem ARGS`, output in $out, exit status in $rc
svc() {
	out=$(service nv_peer_mem "$@" 2>&1)
	rc=$?
}

svc status
expect_eq status-not-loaded-rc 3 "$rc"
expect_eq modprobe-softdep "softdep nvidia_peermem pre: ib_core nvidia" "$($K/modprobe -c | grep '^softdep nvidia_peermem ')"

if $K/modinfo nvidia >/dev/null 2>&1; then
	have_nvidia=1
	echo "30-service: a module named nvidia exists; default prerequisites"
else
	have_nvidia=
	svc start
	expect_eq start-without-nvidia-rc 1 "$rc"
	case $out in *"required module nvidia"*) pass start-without-nvidia-message ;; *) fail start-without-nvidia-message "$out" ;; esac
	if loaded nvidia_peermem; then fail start-without-nvidia-not-loaded "loaded anyway"; else pass start-without-nvidia-not-loaded; fi
	echo "30-service: no nvidia module in this guest; PREREQ_MODULES=ib_core from here on"
	echo 'PREREQ_MODULES="ib_core"' >>$CONF
fi

svc start
expect_eq start-rc 0 "$rc"
if loaded nvidia_peermem && loaded ib_core; then pass start-loaded; else fail start-loaded "$out"; fi
svc status
expect_eq status-loaded-rc 0 "$rc"
case $out in *"is loaded (version $V)"*) pass status-version ;; *) fail status-version "$out" ;; esac
svc start
expect_eq start-again-rc 0 "$rc"
svc restart
expect_eq restart-rc 0 "$rc"
if loaded nvidia_peermem; then pass restart-loaded; else fail restart-loaded "$out"; fi
svc stop
expect_eq stop-rc 0 "$rc"
if loaded nvidia_peermem; then fail stop-unloaded "still loaded: $out"; else pass stop-unloaded; fi
if loaded ib_core; then pass stop-keeps-ib_core; else fail stop-keeps-ib_core "ib_core was unloaded too"; fi
svc status
expect_eq status-after-stop-rc 3 "$rc"
svc bogus
expect_eq bad-verb-rc 2 "$rc"

sed -i 's/^ONBOOT=yes/ONBOOT=no/' $CONF
svc start
expect_eq onboot-no-start-rc 0 "$rc"
if loaded nvidia_peermem; then fail onboot-no-not-loaded "loaded"; else pass onboot-no-not-loaded; fi
# restart follows start: it neither loads the module nor unloads a loaded one.
svc restart
expect_eq onboot-no-restart-rc 0 "$rc"
if loaded nvidia_peermem; then fail onboot-no-restart-not-loaded "loaded: $out"; else pass onboot-no-restart-not-loaded; fi
expect_ok onboot-no-modprobe $K/modprobe nvidia_peermem
svc restart
expect_eq onboot-no-restart-loaded-rc 0 "$rc"
case $out in *"not restarting nvidia_peermem: ONBOOT=no"*) pass onboot-no-restart-message ;; *) fail onboot-no-restart-message "$out" ;; esac
if loaded nvidia_peermem; then pass onboot-no-restart-keeps-module; else fail onboot-no-restart-keeps-module "unloaded: $out"; fi
expect_ok onboot-no-rmmod $K/rmmod nvidia_peermem
sed -i 's/^ONBOOT=no/ONBOOT=yes/' $CONF

# modprobe with the installed rules: ib_core and the GPU driver (the
# simulator named nvidia) come first, even with a GPU driver's install rule
# that would load another module.
$K/rmmod ib_core 2>/dev/null
if loaded ib_core; then fail ib_core-unloaded "ib_core still loaded (in use?)"; else pass ib_core-unloaded; fi
if [ -n "$have_nvidia" ]; then
	$K/rmmod nvidia 2>/dev/null
	if loaded nvidia; then fail nvidia-unloaded "nvidia still loaded (in use?)"; else pass nvidia-unloaded; fi
fi
mkdir -p /etc/modprobe.d # not in the initramfs
printf 'install nvidia-peermem modprobe -i nvidia-current-peermem $CMDLINE_OPTS\n' >/etc/modprobe.d/nvidia.conf
expect_ok modprobe-dash-installed $K/modprobe nvidia-peermem
if loaded nvidia_peermem; then pass modprobe-loaded-ours; else fail modprobe-loaded-ours "not loaded"; fi
if loaded ib_core; then pass modprobe-softdep-loaded-ib_core; else fail modprobe-softdep-loaded-ib_core "ib_core not loaded"; fi
# nvidia comes back too. Unlike ib_core, it would without the softdep's
# nvidia: modules.dep lists it (the module links nvidia_p2p_*);
# modprobe-softdep above checks that kmod reads the softdep.
if [ -z "$have_nvidia" ]; then
	echo "30-service: no nvidia module in this guest; not checked that modprobe loads it"
elif loaded nvidia; then pass modprobe-loaded-nvidia; else fail modprobe-loaded-nvidia "nvidia not loaded"; fi
expect_eq modprobe-version "$V" "$(cat /sys/module/nvidia_peermem/version 2>&1)"
expect_ok rmmod-after-modprobe $K/rmmod nvidia_peermem

# Clean up for the scenarios that follow.
rm -f /etc/modprobe.d/nvidia.conf
rmdir /etc/modprobe.d 2>/dev/null
rm -f /etc/init.d/nv_peer_mem /etc/modules-load.d/nvidia-peermem.conf /usr/lib/modprobe.d/00-nvidia-peer-memory.conf
rm -rf /etc/infiniband /usr/lib/nvidia-peer-memory /usr/lib/systemd/system/nv_peer_mem.service
[ -n "$had_nvidia" ] || ! loaded nvidia || $K/rmmod nvidia 2>/dev/null
[ -n "$had_ib_core" ] || $K/rmmod ib_core 2>/dev/null
ln -sf /bin/busybox /usr/bin/sh
exit 0
