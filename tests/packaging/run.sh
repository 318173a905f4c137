#!/usr/bin/env bash
# Packaging suite (make check-packaging; a suite of make check). Runs in a
# throw-away overlay over the cached packaging root (tests/packaging/root.sh):
#   static checks, build_module.sh (deb and rpm, reproducible), the Debian
#   packages (contents, maintainer scripts, lintian), the RPMs (rpmlint),
#   both again for arm64 (cross-built: dpkg-buildpackage --host-arch arm64,
#   rpmbuild --target aarch64; the aarch64 doctor run with qemu-aarch64),
#   rust-headers.sh's refusals, DKMS building the real Rust module against
#   Debian's stock 7.3 headers, the service with a stand-in kmod, a new
#   kernel, NVIDIA driver and OFED upgrades, the kmod RPM, and purge; the
#   doctor (built with cargo into both package formats) installed and run,
#   directly and as `service nv_peer_mem doctor`.
# Ends with "PACKAGING-SUMMARY N passed, N failed".
# The per-kernel Rust overlays are cached in $NVPM_CACHE/rust-headers, keyed
# like rust-headers.sh keys them; NVPM_PKGTEST_COLD=1 ignores that cache.
# NVPM_PKGTEST_STOP_AFTER=arm64 ends the suite after the arm64 packages (the
# package builds only, about 4 minutes: to work on the packaging);
# =rust-headers after rust-headers.sh's refusals.
# shellcheck source-path=SCRIPTDIR/../..
# shellcheck disable=SC2317,SC2016 # functions run through check; scripts for the root in single quotes
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
REPO=$PWD
LOGS=$REPO/build/logs/packaging
[ "$(id -u)" = 0 ] || die "the packaging suite needs root (chroot, mounts)"
if [ ! -r "$NVPM_CACHE/kernel.env" ]; then scripts/provision.sh || die "provisioning failed"; fi
enter_private_namespace "$@"
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log

SUITE=packaging SUMMARY=PACKAGING
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh

# --- the root -----------------------------------------------------------------
step "packaging root (cached; a cold build takes about 2 minutes)"
PKGROOT=$(tests/packaging/root.sh) || {
	bad root "tests/packaging/root.sh failed"
	finish
}
# One packaging run at a time per cache (the overlay and its mounts).
exec 8>"$NVPM_CACHE/.pkgtest.lock"
flock -n 8 || {
	step "waiting for another packaging test run on this machine to finish"
	flock 8
}
# shellcheck source=/dev/null
. "$PKGROOT/.pkgroot.env"
V=$(cat VERSION)
RUN=$NVPM_CACHE/pkgtest
ROOT=$RUN/root
rm -rf "$RUN/upper" "$RUN/work"
mkdir -p "$RUN/upper" "$RUN/work" "$ROOT"
mount -t overlay overlay -o "lowerdir=$PKGROOT,upperdir=$RUN/upper,workdir=$RUN/work" "$ROOT" || die "overlay mount failed"
mount -t proc proc "$ROOT/proc"
mount -t tmpfs tmpfs "$ROOT/sys"
mount -t tmpfs tmpfs "$ROOT/run"
# A clean copy of the tree: what git has (tracked and new files).
mkdir -p "$ROOT/build/src" "$ROOT/build/out"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$ROOT/build/src"
# The pinned Rust sources of carried mode, which build_module.sh puts in the
# source package: fetched on the host (the root is offline), as a release
# tarball has them.
step "the pinned Rust sources of carried mode (kbuild/carried-source.sh)"
if kbuild/carried-source.sh build/carried-src >"$LOGS/carried-src.log" 2>&1; then
	cp -pR build/carried-src "$ROOT/build/src/carried-src"
else
	bad carried-src "see $LOGS/carried-src.log"
fi
# The crates of Cargo.lock (the doctor's), which build_module.sh vendors into
# the source package: the root is offline, so its cargo has them in its
# registry cache, as a user's cargo that fetched them once has, and is told
# to stay offline. They are fetched here into a cargo home of the suite's
# (kept in the cache: later runs fetch nothing new). (A directory source
# would not do: Debian's cargo 1.85 cannot vendor from one, "no matching
# package".) Only build_module.sh has them: they are gone before the
# packages build.
step "the doctor's crates for build_module.sh in the offline root (cargo fetch)"
if ! CARGO_HOME=$RUN/cargo-home cargo fetch --locked >"$LOGS/crates.log" 2>&1; then
	bad crates "cargo fetch failed, see $LOGS/crates.log"
	finish
fi
mkdir -p "$ROOT/root/.cargo"
cp -a "$RUN/cargo-home/registry" "$ROOT/root/.cargo/"
printf '[net]\noffline = true\n' >"$ROOT/root/.cargo/config.toml"
# doctor-json.py FILE RC [PATH=VALUE...]: nvidia-peermem-doctor's --json in
# FILE, run with exit status RC, is the report of this version: 28 checks,
# exit_status = RC; PATH is a dotted path (facts.module.loaded) or
# check:ID for a check's status; VALUE is JSON (strings bare).
cat >"$ROOT/build/doctor-json.py" <<'EOF'
import json, sys
path, rc, version = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(path) as f:
    doc = json.load(f)
assert list(doc) == ["tool", "version", "root", "verdict", "exit_status", "checks", "facts", "cuda", "stats", "topology"], list(doc)
assert doc["tool"] == "nvidia-peermem-doctor", doc["tool"]
assert doc["version"] == version, "version %r, VERSION %r" % (doc["version"], version)
assert doc["exit_status"] == rc, "exit_status %r, exit status %r" % (doc["exit_status"], rc)
assert doc["verdict"] == "blocked" if rc else doc["verdict"] in ("ok", "degraded"), doc["verdict"]
checks = {c["id"]: c for c in doc["checks"]}
assert len(doc["checks"]) == 28 and doc["checks"][0]["id"] == "kernel.modules", list(checks)
for want in sys.argv[4:]:
    key, value = want.split("=", 1)
    if key.startswith("check:"):
        got = checks[key[6:]]["status"]
    else:
        got = doc
        for k in key.split("."):
            got = got[k]
    shown = got if isinstance(got, str) else json.dumps(got)
    assert shown == value, "%s: %r, expected %r" % (key, shown, value)
print("doctor JSON ok:", doc["verdict"], ", ".join("%s=%s" % (c["id"], c["status"]) for c in doc["checks"]))
EOF
inr() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
	LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive TMPDIR=/tmp "$@"; }
# insh NAME SCRIPT: one result, a shell script run in the root (/build).
insh() {
	local n=$1
	shift
	check "$n" inr sh -ec "cd /build; $1"
}
# Steps: output to a log. Long ones show DKMS's progress every 20 s.
inlog() { # LOG SCRIPT
	local log=$LOGS/$1.log
	inr sh -ec "cd /build; $2" >"$log" 2>&1
}
inlog_progress() { # LOG SCRIPT
	local rc ticker make_log="$ROOT/var/lib/dkms/nvidia-peer-memory/$V/build/make.log"
	(
		while sleep 20; do
			line=$(grep -E '^rust-headers:|^  (RUSTC|LD|BINDGEN|MODPOST)' "$make_log" 2>/dev/null | tail -n1 | cut -c1-110)
			printf '         ... %s\n' "${line:-(working)}"
		done
	) &
	ticker=$!
	inlog "$@"
	rc=$?
	kill "$ticker" 2>/dev/null
	wait "$ticker" 2>/dev/null
	return $rc
}

# --- static checks --------------------------------------------------------------
step "static checks"
for f in packaging/nv_peer_mem.sh packaging/nv_peer_mem.init packaging/dkms-rebuild.sh packaging/dkms-ready.sh packaging/kernel-postrm.sh \
	scripts/rust-headers.sh scripts/find-symvers.sh scripts/stamp-version.sh build_module.sh debian/*.postinst debian/*.prerm debian/*.postrm \
	tests/packaging/fake-kmod; do
	insh "shellcheck:$f" "shellcheck -s sh src/$f"
done
for f in tests/packaging/run.sh tests/packaging/root.sh tests/guest/scenarios/3*.sh; do
	insh "shellcheck:$f" "shellcheck -x src/$f"
done
insh "shellcheck:rpm-scriptlets" 'rpmspec -P --define "_sourcedir /tmp" --without kmod src/rpm/nvidia_peer_memory.spec >/tmp/spec.txt
	awk "/^%(post|preun|postun|triggerin|transfiletriggerin)( |\$)/ {on=1; print \"#\", \$0; next} /^%/ {on=0} on" /tmp/spec.txt >/tmp/scriptlets.sh
	grep -q "dkms-rebuild" /tmp/scriptlets.sh && shellcheck -s sh -e SC2043,SC2045 /tmp/scriptlets.sh'
check version-consistent inr sh -c 'cd /build/src && scripts/stamp-version.sh --check'
check dkms.conf-fields inr bash -ec 'cd /build/src; . ./dkms.conf
	test "$PACKAGE_NAME" = nvidia-peer-memory && test "$PACKAGE_VERSION" = "$(cat VERSION)"
	test "${BUILT_MODULE_NAME[0]}" = nvidia_peermem && test "$AUTOINSTALL" = yes
	grep -q "^MAKE\[0\]=\"make KDIR=\${kernel_source_dir} module\"" dkms.conf
	grep -q "^PRE_BUILD=\"scripts/rust-headers.sh " dkms.conf'
# Signing is DKMS's own (framework.conf: mok_signing_key, mok_certificate):
# nothing here signs or points DKMS at another key, so the MOK that README
# and the doctor's kernel.signing tell to enroll is the one that signs. The
# one framework.conf.d file shipped sets DKMS's post_transaction command
# only.
check signing-left-to-dkms inr sh -ec 'cd /build/src; ! grep -Eq "^(SIGN_TOOL|POST_BUILD|POST_INSTALL)=" dkms.conf &&
	! grep -rqsE "sign-file|sign_file|mok_signing_key|mok_certificate" dkms.conf debian rpm packaging build_module.sh &&
	test "$(grep -Ev "^(#|$)" packaging/dkms-post-transaction.conf | cut -d= -f1)" = post_transaction'

# --- build_module.sh ----------------------------------------------------------------
step "build_module.sh: deb and rpm flavours, twice each"
ORIG=out/nvidia-peer-memory_${V}.orig.tar.gz
SRPM=out/nvidia_peer_memory-$V-1.src.rpm
insh build_module-deb "cd src && ./build_module.sh --out /build/out >/dev/null && test -s ../$ORIG"
insh orig-contents "tar -tzf $ORIG >/tmp/orig.lst
	for f in dkms.conf Makefile Kbuild VERSION src/nvidia_peermem.rs scripts/rust-headers.sh packaging/nv_peer_mem.sh rpm/nvidia_peer_memory.spec \
		Cargo.toml Cargo.lock src/doctor/Cargo.toml src/doctor/src/main.rs src/doctor/nvidia-peermem-doctor.1 tests/tool/Cargo.toml \
		kbuild/carried.pin carried-src/rust/kernel/lib.rs carried-src/scripts/min-tool-version.sh carried-src/COPYING; do
		grep -qx nvidia-peer-memory-$V/\$f /tmp/orig.lst || { echo missing \$f; exit 1; }; done
	! grep -Ev '^nvidia-peer-memory-$V/' /tmp/orig.lst
	! grep '^nvidia-peer-memory-$V/tests/.' /tmp/orig.lst | grep -v '^nvidia-peer-memory-$V/tests/tool/'
	! grep -v -e '^nvidia-peer-memory-$V/vendor/' -e '^nvidia-peer-memory-$V/carried-src/' /tmp/orig.lst | grep -E '\.(ko|o|cmd)\$|/\.git|/debian/|/build/'
	! grep '^nvidia-peer-memory-$V/carried-src/' /tmp/orig.lst | grep -E '\.(ko|o|cmd)\$|/\.git/|/debian/|/build/'"
# The crates of Cargo.lock, each vendored with its checksums, and nothing
# else (loom's stay out of the workspace), with the config that points cargo there.
insh orig-vendored "tar -xzf $ORIG -C /tmp nvidia-peer-memory-$V/Cargo.lock nvidia-peer-memory-$V/.cargo/config.toml
	grep -qx 'directory = \"vendor\"' /tmp/nvidia-peer-memory-$V/.cargo/config.toml
	awk '/^name = / {n = \$3} /^source = / {gsub(/\"/, \"\", n); print n}' /tmp/nvidia-peer-memory-$V/Cargo.lock | sort >/tmp/lock-crates
	sed -n 's|^nvidia-peer-memory-$V/vendor/\\([^/]*\\)/\\.cargo-checksum\\.json\$|\\1|p' /tmp/orig.lst | sort >/tmp/vendored
	diff /tmp/lock-crates /tmp/vendored && grep -qx flate2 /tmp/vendored && grep -qx serde_json /tmp/vendored && grep -qx lexopt /tmp/vendored && ! grep -qx loom /tmp/vendored"
insh build_module-deb-reproducible "cp $ORIG /tmp/first.tar.gz && sleep 1 && cd src && ./build_module.sh --out /build/out >/dev/null && cmp /tmp/first.tar.gz ../$ORIG"
insh build_module-rpm "cd src && ./build_module.sh --flavor rpm --out /build/out >/dev/null && rpm -qpl ../$SRPM | grep -qx nvidia-peer-memory-$V.tar.gz && rpm -qpl ../$SRPM | grep -qx nvidia_peer_memory.spec"
insh build_module-rpm-reproducible "cp $SRPM /tmp/first.src.rpm && sleep 1 && cd src && FORCE_FLAVOR=rpm ./build_module.sh --out /build/out >/dev/null && cmp /tmp/first.src.rpm ../$SRPM"
insh build_module-bad-version "cp -r src /tmp/badv && echo 1.x >/tmp/badv/VERSION && ! /tmp/badv/build_module.sh --out /tmp/badv-out"
# Without the crates (offline, none given): a clear error, no package.
insh build_module-no-crates "cp -r src /tmp/nocr && rm -rf /tmp/nocr-out && rc=0
	env HOME=/tmp/nocr-home CARGO_NET_OFFLINE=true /tmp/nocr/build_module.sh --out /tmp/nocr-out 2>/tmp/nocr.err || rc=\$?
	test \$rc = 1 && grep -q 'build_module.sh: cargo vendor failed' /tmp/nocr.err && ! ls /tmp/nocr-out/*.tar.gz 2>/dev/null"
# From here the packages have what the source package carries, no more.
rm -rf "$ROOT/root/.cargo"

# --- Debian packages --------------------------------------------------------------------
step "Debian packages from the orig tarball (dpkg-buildpackage)"
DEB_ARCH=$(inr dpkg --print-architecture)
DEB_MAIN=nvidia-peer-memory_${V}-1_${DEB_ARCH}.deb
DEB_DBG=nvidia-peer-memory-dbgsym_${V}-1_${DEB_ARCH}.deb
DEB_DKMS=nvidia-peer-memory-dkms_${V}-1_all.deb
if inlog dpkg-buildpackage "rm -rf deb && mkdir deb && cd deb && cp ../$ORIG . && tar -xzf *.orig.tar.gz && cp -r ../src/debian nvidia-peer-memory-$V/ &&
	cd nvidia-peer-memory-$V && dpkg-buildpackage -us -uc"; then ok dpkg-buildpackage; else bad dpkg-buildpackage "see $LOGS/dpkg-buildpackage.log"; fi
# The doctor was built offline (--frozen, an empty CARGO_HOME, no network
# in the root) from the tarball's vendored crates.
check deb-doctor-vendored sh -c "grep -q 'cargo build --release --frozen -p nvidia-peermem-doctor' '$LOGS/dpkg-buildpackage.log' &&
	grep -Eq '^ +Compiling flate2 v' '$LOGS/dpkg-buildpackage.log'"
insh deb-files "cd deb && ls *.deb | sort | tr '\n' ' ' | grep -qx '$DEB_DBG $DEB_DKMS $DEB_MAIN ' && ls *.dsc *.debian.tar.xz
	dpkg -c $DEB_DBG | grep -q './usr/lib/debug/.build-id/.*\\.debug\$'"
insh deb-dkms-contents "dpkg -c deb/$DEB_DKMS >/tmp/c; for f in dkms.conf Makefile Kbuild VERSION src/nvidia_peermem.rs src/ffi/nv-p2p.h scripts/abi-symvers.sh scripts/rust-headers.sh; do
	grep -q \" ./usr/src/nvidia-peer-memory-$V/\$f\$\" /tmp/c || { echo missing \$f; exit 1; }; done
	grep -q ' ./usr/lib/nvidia-peer-memory/dkms-rebuild\$' /tmp/c && grep -q ' ./usr/lib/nvidia-peer-memory/rust-headers\$' /tmp/c
	grep -q ' ./usr/lib/nvidia-peer-memory/dkms-ready\$' /tmp/c && grep -q ' ./usr/src/nvidia-peer-memory-$V/carried-src/rust/kernel/lib.rs\$' /tmp/c
	dpkg-deb -f deb/$DEB_DKMS Depends | grep -q 'dkms' && dpkg-deb -f deb/$DEB_DKMS Depends | grep -q 'rustc'"
insh deb-main-contents "dpkg -c deb/$DEB_MAIN >/tmp/c
	grep -q '^-rwxr-xr-x .* ./etc/init.d/nv_peer_mem\$' /tmp/c && grep -q '^-rwxr-xr-x .* ./usr/bin/nvidia-peermem-doctor\$' /tmp/c
	grep -q ' ./usr/share/man/man1/nvidia-peermem-doctor.1.gz\$' /tmp/c && dpkg-deb -f deb/$DEB_MAIN Depends | grep -q 'libc6'
	for f in etc/infiniband/nv_peer_mem.conf usr/lib/systemd/system/nv_peer_mem.service usr/lib/modprobe.d/00-nvidia-peer-memory.conf etc/modules-load.d/nvidia-peermem.conf usr/lib/nvidia-peer-memory/nv_peer_mem; do
		grep -q \" ./\$f\$\" /tmp/c || { echo missing \$f; exit 1; }; done
	dpkg-deb -e deb/$DEB_MAIN /tmp/ctl-main && grep -qx /etc/infiniband/nv_peer_mem.conf /tmp/ctl-main/conffiles"
insh deb-maintainer-scripts "dpkg-deb -e deb/$DEB_DKMS /tmp/ctl-dkms && dpkg-deb -e deb/$DEB_MAIN /tmp/ctl-main2
	grep -q common.postinst /tmp/ctl-dkms/postinst && grep -q 'triggered' /tmp/ctl-dkms/postinst && grep -q 'dkms remove' /tmp/ctl-dkms/prerm
	grep -qx 'interest-noawait /usr/src' /tmp/ctl-dkms/triggers
	grep -q 'update-rc.d nv_peer_mem defaults' /tmp/ctl-main2/postinst && grep -q 'nvpm_not_started' /tmp/ctl-main2/postinst
	grep -q 'deb-systemd-helper' /tmp/ctl-main2/postinst"
# dh_installinit puts the error handler in the prerm too (the stop on
# removal): each script that calls it must define it.
insh deb-error-handler-defined "dpkg-deb -e deb/$DEB_MAIN /tmp/ctl-eh && grep -q '|| nvpm_not_started' /tmp/ctl-eh/prerm
	for s in preinst postinst prerm postrm; do
		[ -f /tmp/ctl-eh/\$s ] && grep -q '|| nvpm_not_started' /tmp/ctl-eh/\$s || continue
		grep -q '^nvpm_not_started()' /tmp/ctl-eh/\$s || { echo \"\$s calls nvpm_not_started, which it does not define\"; exit 1; }
	done"
if inlog lintian "cd deb && lintian -I --pedantic --fail-on error,warning,info,pedantic --tag-display-limit 0 *.changes"; then ok lintian; else
	bad lintian "$(grep -E '^[EWIP]:' "$LOGS/lintian.log" | head -n 20)"; fi

# --- RPM ----------------------------------------------------------------------------------
step "RPMs from the source rpm (rpmbuild --rebuild --without kmod)"
if inlog rpmbuild-rebuild "rpmbuild --rebuild --nodeps --without kmod --define '_topdir /build/rpmtop' --define 'dist %{nil}' $SRPM"; then
	ok rpmbuild-rebuild; else bad rpmbuild-rebuild "see $LOGS/rpmbuild-rebuild.log"; fi
check rpm-doctor-vendored sh -c "grep -q 'cargo build --release --frozen -p nvidia-peermem-doctor' '$LOGS/rpmbuild-rebuild.log' &&
	grep -Eq '^ +Compiling flate2 v' '$LOGS/rpmbuild-rebuild.log'"
RPM_DKMS=rpmtop/RPMS/noarch/nvidia_peer_memory-dkms-$V-1.noarch.rpm
insh rpm-contents "ls rpmtop/RPMS/*/ ; rpm -qpl rpmtop/RPMS/*/nvidia_peer_memory-$V-1.*.rpm >/tmp/m; rpm -qpl $RPM_DKMS >/tmp/d
	for f in /etc/init.d/nv_peer_mem /etc/infiniband/nv_peer_mem.conf /usr/lib/systemd/system/nv_peer_mem.service /usr/lib/modprobe.d/00-nvidia-peer-memory.conf \
		/usr/bin/nvidia-peermem-doctor; do
		grep -qx \$f /tmp/m || { echo missing \$f; exit 1; }; done
	grep -qx /usr/src/nvidia-peer-memory-$V/dkms.conf /tmp/d && grep -qx /usr/src/nvidia-peer-memory-$V/carried-src/rust/kernel/lib.rs /tmp/d
	rpm -qp --configfiles rpmtop/RPMS/*/nvidia_peer_memory-$V-1.*.rpm | grep -qx /etc/infiniband/nv_peer_mem.conf
	rpm -qp --triggers $RPM_DKMS | grep -q nvidia-kmod-common && rpm -qp --triggers $RPM_DKMS | grep -q mlnx-ofa_kernel
	rpm -qp --scripts $RPM_DKMS | grep -q 'dkms remove'
	grep -q '^/usr/share/man/man1/nvidia-peermem-doctor.1' /tmp/m && rpm -qp --requires rpmtop/RPMS/*/nvidia_peer_memory-$V-1.*.rpm | grep -q '^libc.so.6'"
# The dkms RPM's triggers name every package of MOFED's rpm packaging that
# installs its modules or sources (read from its pinned spec), and NVIDIA's
# rpm names (NVIDIA/yum-packaging-precompiled-kmod's DISTROS.md, the
# DKMS flavours of NVIDIA/yum-packaging-nvidia-driver).
rpm_triggers_names() {
	local tarball spec names rc=0 missing=
	tarball=$(tests/neighbours/ofed-src.sh 25.10.1.7.1.1) || rc=$?
	if [ "$rc" = 2 ]; then echo "  $tarball (packaging/rpm-triggers-ofed-names)"; return; fi
	[ "$rc" = 0 ] || { bad rpm-triggers-ofed-names "$tarball"; return; }
	spec=$RUN/mlnx-ofa_kernel.spec
	if ! tar -xzOf "$tarball" --wildcards '*/mlnx-ofa_kernel.spec' >"$spec" || ! names=$(tests/neighbours/ofed-rpm-names.sh "$spec"); then
		bad rpm-triggers-ofed-names "cannot read the names from $tarball's spec"
		return
	fi
	inr rpm -qp --triggers "/build/$RPM_DKMS" >"$RUN/triggers" 2>&1
	for n in $names kmod-nvidia-open-dkms kmod-nvidia-latest-dkms nvidia-kmod-common kmod-nvidia-open nvidia-open-kmod; do
		grep -Eq "(-- |, )$n(,|\$)" "$RUN/triggers" || missing+=" $n"
	done
	if [ -z "$missing" ] && [ "$(wc -w <<<"$names")" -ge 5 ]; then ok rpm-triggers-ofed-names; else
		bad rpm-triggers-ofed-names "not in the triggers:${missing:- (only $(wc -w <<<"$names") names read)}: $(cat "$RUN/triggers")"; fi
}
rpm_triggers_names
# The RPM's doctor, unpacked: it runs and reports this version.
insh rpm-doctor-runs "rm -rf /tmp/rpmx && mkdir /tmp/rpmx && rpm2cpio rpmtop/RPMS/*/nvidia_peer_memory-$V-1.*.rpm | (cd /tmp/rpmx && cpio -idm --quiet)
	test \"\$(/tmp/rpmx/usr/bin/nvidia-peermem-doctor --version)\" = 'nvidia-peermem-doctor $V'
	rc=0; /tmp/rpmx/usr/bin/nvidia-peermem-doctor --json >/tmp/rpm-doctor.json || rc=\$?
	python3 doctor-json.py /tmp/rpm-doctor.json \$rc $V"

# --- arm64: the same packages, cross-built ------------------------------------------------
# Debian's cross build of the architecture-dependent package, as Debian's
# cross builders run it (dpkg-buildpackage -B --host-arch arm64 -Pcross,nocheck),
# from the same orig tarball: debian/rules builds the doctor for
# aarch64-unknown-linux-gnu offline from the vendored crates, with Debian's
# libstd-rust-dev:arm64 and aarch64-linux-gnu-gcc (tests/packaging/root.sh
# installs them). The -dkms package is architecture-independent: built once,
# above. Then the spec's cross build: rpmbuild --target aarch64. Each
# package is amd64's (x86_64's) apart from the architecture, its doctor an
# AArch64 ELF that runs (qemu-aarch64 from qemu-user, called directly: no
# binfmt) and reports what the amd64 doctor reports on the same root.
step "arm64: the Debian packages cross-built (dpkg-buildpackage --host-arch arm64), lintian; the RPMs (rpmbuild --target aarch64)"
DEB64_MAIN=nvidia-peer-memory_${V}-1_arm64.deb
DEB64_DBG=nvidia-peer-memory-dbgsym_${V}-1_arm64.deb
if inlog dpkg-buildpackage-arm64 "rm -rf deb-arm64 && mkdir deb-arm64 && cd deb-arm64 && cp ../$ORIG . && tar -xzf *.orig.tar.gz &&
	cp -r ../src/debian nvidia-peer-memory-$V/ && cd nvidia-peer-memory-$V &&
	DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -B --host-arch arm64 -Pcross,nocheck"; then
	ok dpkg-buildpackage-arm64; else bad dpkg-buildpackage-arm64 "see $LOGS/dpkg-buildpackage-arm64.log"; fi
# cross_built LOG: cargo built the doctor for aarch64, linked by the cross
# compiler, offline from the vendored crates.
cross_built() {
	grep -q 'cargo build --release --frozen' "$1" && grep -qF -- '--target aarch64-unknown-linux-gnu' "$1" &&
		grep -qF -e "--config 'target.aarch64-unknown-linux-gnu.linker=\"aarch64-linux-gnu-gcc\"'" "$1" && grep -Eq '^ +Compiling flate2 v' "$1"
}
check deb-arm64-doctor-cross-built cross_built "$LOGS/dpkg-buildpackage-arm64.log"
insh deb-arm64-files "cd deb-arm64 && ls *.deb | sort | tr '\n' ' ' | grep -qx '$DEB64_DBG $DEB64_MAIN ' &&
	grep -qx 'Architecture: arm64' nvidia-peer-memory_${V}-1_arm64.changes &&
	test \"\$(dpkg-deb -f $DEB64_MAIN Architecture)\" = arm64 && test \"\$(dpkg-deb -f $DEB64_DBG Architecture)\" = arm64"
# elf_aarch64 FILE: an AArch64 executable for glibc's aarch64 loader (or its debug file).
cat >"$ROOT/build/elf-aarch64.sh" <<'EOF'
readelf -h "$1" | grep -Eq '^ +Machine: +AArch64$' || { readelf -h "$1"; exit 1; }
file -b "$1" | grep -q '^ELF 64-bit LSB .*, ARM aarch64,' || { file "$1"; exit 1; }
[ -n "${2:-}" ] || readelf -l "$1" | grep -qF '[Requesting program interpreter: /lib/ld-linux-aarch64.so.1]'
EOF
# The doctor, and its debug information in the -dbgsym package under its build ID.
insh deb-arm64-doctor-aarch64 "rm -rf /tmp/deb64x /tmp/deb64dbg && dpkg-deb -x deb-arm64/$DEB64_MAIN /tmp/deb64x && dpkg-deb -x deb-arm64/$DEB64_DBG /tmp/deb64dbg
	d=/tmp/deb64x/usr/bin/nvidia-peermem-doctor; sh elf-aarch64.sh \$d
	id=\$(readelf -n \$d | sed -n 's/^ *Build ID: *//p'); test -n \"\$id\"
	dbg=/tmp/deb64dbg/usr/lib/debug/.build-id/\$(echo \$id | cut -c1-2)/\$(echo \$id | cut -c3-).debug; sh elf-aarch64.sh \$dbg debug"
# The same files, modes and maintainer scripts as amd64's; every file but
# the doctor byte for byte (md5sums); the same control fields but the
# architecture, size and build IDs.
cat >"$ROOT/build/deb-same.sh" <<'EOF'
set -e
list() { dpkg-deb -c "$1" | awk '{ $3 = $4 = $5 = ""; print }' | sed -E 's|\.build-id/[0-9a-f]{2}/$|.build-id/ID/|; s|\.build-id/[0-9a-f]{2}/[0-9a-f]+\.debug$|.build-id/ID/ID.debug|'; }
fields() { dpkg-deb -f "$1" | grep -Ev '^(Architecture|Installed-Size|Build-Ids):'; }
for p in "nvidia-peer-memory" "nvidia-peer-memory-dbgsym"; do
	a=deb/${p}_$1-1_amd64.deb b=deb-arm64/${p}_$1-1_arm64.deb
	list "$a" >/tmp/la; list "$b" >/tmp/lb; diff /tmp/la /tmp/lb
	fields "$a" >/tmp/fa; fields "$b" >/tmp/fb; diff /tmp/fa /tmp/fb
	rm -rf /tmp/ca /tmp/cb; dpkg-deb -e "$a" /tmp/ca; dpkg-deb -e "$b" /tmp/cb
	diff -r -x control -x md5sums /tmp/ca /tmp/cb
	# (-dbgsym: none.)
	{ grep -Ev ' usr/(bin/nvidia-peermem-doctor|lib/debug/.*)$' /tmp/ca/md5sums || :; } >/tmp/ma
	{ grep -Ev ' usr/(bin/nvidia-peermem-doctor|lib/debug/.*)$' /tmp/cb/md5sums || :; } >/tmp/mb
	diff /tmp/ma /tmp/mb
	# The main package: its other files are there to compare.
	[ "$p" != nvidia-peer-memory ] || [ "$(wc -l </tmp/ma)" -ge 8 ]
done
EOF
insh deb-arm64-same-as-amd64 "sh deb-same.sh $V"
if inlog lintian-arm64 "cd deb-arm64 && lintian -I --pedantic --fail-on error,warning,info,pedantic --tag-display-limit 0 *_arm64.changes"; then
	ok lintian-arm64; else bad lintian-arm64 "$(grep -E '^[EWIP]:' "$LOGS/lintian-arm64.log" | head -n 20)"; fi
# The aarch64 doctor under qemu-aarch64: its version, usage, exit statuses
# and report are the amd64 doctor's, on the same root.
insh deb-arm64-doctor-runs "rm -rf /tmp/debx && dpkg-deb -x deb/$DEB_MAIN /tmp/debx
	d64='qemu-aarch64 /tmp/deb64x/usr/bin/nvidia-peermem-doctor' d=/tmp/debx/usr/bin/nvidia-peermem-doctor
	test \"\$(\$d64 --version)\" = 'nvidia-peermem-doctor $V'
	\$d64 --help >/tmp/help64 && \$d --help >/tmp/help && cmp /tmp/help /tmp/help64 && grep -q '^usage: nvidia-peermem-doctor' /tmp/help64
	rc=0; \$d64 --bogus 2>/tmp/err64 || rc=\$?; test \$rc = 2 && grep -qx \"nvidia-peermem-doctor: invalid option '--bogus'\" /tmp/err64
	rc=0; \$d64 --json >/tmp/doctor64.json || rc=\$?; python3 doctor-json.py /tmp/doctor64.json \$rc $V
	rc1=0; \$d --json >/tmp/doctor.json || rc1=\$?; test \$rc = \$rc1 && cmp /tmp/doctor.json /tmp/doctor64.json"

if inlog rpmbuild-aarch64 "rpmbuild --rebuild --nodeps --without kmod --target aarch64 --define '_topdir /build/rpmtop-aarch64' --define 'dist %{nil}' $SRPM"; then
	ok rpmbuild-aarch64; else bad rpmbuild-aarch64 "see $LOGS/rpmbuild-aarch64.log"; fi
# rpm's strip, too, is the target's.
rpm_cross_built() { cross_built "$1" && grep -qx '+ /usr/lib/rpm/brp-strip aarch64-linux-gnu-strip' "$1"; }
check rpm-aarch64-doctor-cross-built rpm_cross_built "$LOGS/rpmbuild-aarch64.log"
RPM64=rpmtop-aarch64/RPMS/aarch64/nvidia_peer_memory-$V-1.aarch64.rpm
RPM64_DKMS=rpmtop-aarch64/RPMS/noarch/nvidia_peer_memory-dkms-$V-1.noarch.rpm
RPM86=rpmtop/RPMS/x86_64/nvidia_peer_memory-$V-1.x86_64.rpm
insh rpm-aarch64-files "test \"\$(cd rpmtop-aarch64/RPMS && find . -name '*.rpm' | sort | tr '\n' ' ')\" = './aarch64/nvidia_peer_memory-$V-1.aarch64.rpm ./noarch/nvidia_peer_memory-dkms-$V-1.noarch.rpm ' &&
	test \"\$(rpm -qp --qf '%{ARCH}' $RPM64)\" = aarch64"
insh rpm-aarch64-doctor-aarch64 "rm -rf /tmp/rpm64x && mkdir /tmp/rpm64x && rpm2cpio $RPM64 | (cd /tmp/rpm64x && cpio -idm --quiet)
	sh elf-aarch64.sh /tmp/rpm64x/usr/bin/nvidia-peermem-doctor && file -b /tmp/rpm64x/usr/bin/nvidia-peermem-doctor | grep -q ', stripped\$'"
# x86_64's files, modes, scripts, triggers and dependencies (but the C
# library's symbol versions, which differ by architecture).
cat >"$ROOT/build/rpm-same.sh" <<'EOF'
set -e
q() { rpm -qp --qf '[%{FILEMODES:perms} %{FILEUSERNAME} %{FILEGROUPNAME} %{FILEFLAGS:fflags} %{FILENAMES}\n]' "$1"; rpm -qp --scripts --triggers "$1"; }
req() { rpm -qp --requires "$1" | grep -Ev '^(libc\.so\.6\(GLIBC_|ld-linux-)' | sed 's/(x86-64)\|(aarch-64)/(ARCH)/'; }
prov() { rpm -qp --provides "$1" | sed 's/(x86-64)\|(aarch-64)/(ARCH)/'; }
for p in "$1 $2" "$3 $4"; do
	set -- $p
	q "$1" >/tmp/qa; q "$2" >/tmp/qb; diff /tmp/qa /tmp/qb
	req "$1" >/tmp/ra; req "$2" >/tmp/rb; diff /tmp/ra /tmp/rb
	prov "$1" >/tmp/pa; prov "$2" >/tmp/pb; diff /tmp/pa /tmp/pb
done
EOF
insh rpm-aarch64-same-as-x86_64 "sh rpm-same.sh $RPM86 $RPM64 $RPM_DKMS $RPM64_DKMS &&
	rpm -qp --requires $RPM64 >/tmp/req64 && grep -qx 'libc.so.6(GLIBC_2.17)(64bit)' /tmp/req64 && ! grep -Eq 'x86-64|GLIBC_2\.2\.5' /tmp/req64"
insh rpm-aarch64-doctor-runs "test \"\$(qemu-aarch64 /tmp/rpm64x/usr/bin/nvidia-peermem-doctor --version)\" = 'nvidia-peermem-doctor $V'
	rc=0; qemu-aarch64 /tmp/rpm64x/usr/bin/nvidia-peermem-doctor --json >/tmp/rpm-doctor64.json || rc=\$?
	python3 doctor-json.py /tmp/rpm-doctor64.json \$rc $V && cmp /tmp/rpm-doctor.json /tmp/rpm-doctor64.json"
if [ "${NVPM_PKGTEST_STOP_AFTER:-}" = arm64 ]; then finish; fi

# --- rust-headers.sh: refusals --------------------------------------------------------------
step "rust-headers.sh refuses what cannot work, with the reason"
snapshot() { inr sh -c 'find / -xdev \( -path /proc -o -path /sys -o -path /run -o -path /tmp -o -path /root -o -path /build -o -path /var/cache/apt -o -path /var/lib/apt -o -path /var/lib/dpkg -o -path /var/log -o -path /var/cache/debconf -o -path /var/cache/man -o -path /var/cache/ldconfig -o -path /var/lib/dkms/mok.key -o -path /var/lib/dkms/mok.pub -o -path /usr/src/linux-source-7.3.tar.xz -o -path /usr/share/doc/linux-source-7.3 -o -name "*.pyc" \) -prune -o -print' | LC_ALL=C sort; }
# A CONFIG_MODVERSIONS kernel: the CRCs of the driver and RDMA core modules
# installed for that kernel (scripts/find-symvers.sh; its layouts are
# tests/neighbours/lookup.sh's), or tables given; never the stub's CRCs of
# 0. NVPM_SYSROOT roots the lookup in /tmp. /tmp/mvk stands for a Rust
# kernel's headers with its crates (kernel mode).
insh modversions-needs-exporters "mkdir -p /tmp/mvk/scripts /tmp/mvk/rust && touch /tmp/mvk/scripts/target.json /tmp/mvk/rust/libkernel.rmeta /tmp/mvk/rust/libffi.rmeta &&
	printf 'CONFIG_MODVERSIONS=y\nCONFIG_RUST=y\nCONFIG_RUSTC_VERSION_TEXT=\"%s\"\n' \"\$(rustc --version)\" >/tmp/mvk/.config
	if out=\$(NVPM_SYSROOT=/tmp/mv-none make -C src KDIR=/tmp/mvk KREL=7.0.0-14-generic module 2>&1); then echo \"\$out\"; exit 1; fi; echo \"\$out\"
	echo \"\$out\" | grep -q \"the NVIDIA driver's (nvidia_p2p_get_pages): no module of 7.0.0-14-generic exports it; install\" &&
	echo \"\$out\" | grep -q \"the RDMA core's (ib_register_peer_memory_client): no module of 7.0.0-14-generic exports it\" &&
	! echo \"\$out\" | grep -Eq '^ +(RUSTC|CC|MODPOST) '"
# The stub a build without vendor tables uses (build/abi.symvers, CRCs of 0),
# given by hand.
insh modversions-refuses-stub "sh src/scripts/abi-symvers.sh src/src/ffi >/tmp/stub.symvers &&
	if out=\$(make -C src KDIR=/tmp/mvk KREL=7.0.0-14-generic NVPM_EXTRA_SYMBOLS=/tmp/stub.symvers module 2>&1); then echo \"\$out\"; exit 1; fi; echo \"\$out\"
	echo \"\$out\" | grep -q 'has CRCs of 0: it is not from a CONFIG_MODVERSIONS build'"
insh rust-headers-no-linux-source "if out=\$(NVPM_RUST_HEADERS_CACHE=/tmp/rh sh src/scripts/rust-headers.sh $KREL 2>&1); then echo \"\$out\"; exit 1; fi; echo \"\$out\"
	echo \"\$out\" | grep -q 'apt-get install linux-source-7.3=$KPKGVER' && test ! -e /usr/src/linux-headers-$KREL/scripts/target.json"
insh rust-headers-wrong-rustc "mkdir -p /tmp/fakebin && printf '#!/bin/sh\necho rustc 1.96.1 (fake)\n' >/tmp/fakebin/rustc && chmod +x /tmp/fakebin/rustc
	if out=\$(PATH=/tmp/fakebin:\$PATH NVPM_RUST_HEADERS_CACHE=/tmp/rh sh src/scripts/rust-headers.sh $KREL 2>&1); then echo \"\$out\"; exit 1; fi; echo \"\$out\"
	echo \"\$out\" | grep -q \"rustc: the kernel needs 'rustc 1.85.1\""
insh rust-headers-wrong-bindgen "mkdir -p /tmp/fakebin2 && printf '#!/bin/sh\necho bindgen 0.72.0\n' >/tmp/fakebin2/bindgen && chmod +x /tmp/fakebin2/bindgen
	if out=\$(PATH=/tmp/fakebin2:\$PATH NVPM_RUST_HEADERS_CACHE=/tmp/rh sh src/scripts/rust-headers.sh $KREL 2>&1); then echo \"\$out\"; exit 1; fi; echo \"\$out\"
	echo \"\$out\" | grep -q \"bindgen: the kernel needs 'bindgen 0.71.1'\""
insh rust-headers-no-rust-kernel "mkdir -p /tmp/norust && echo 'CONFIG_MODULES=y' >/tmp/norust/.config
	if out=\$(sh src/scripts/rust-headers.sh 1.2.3-norust /tmp/norust 2>&1); then echo \"\$out\"; exit 1; fi; echo \"\$out\"; echo \"\$out\" | grep -q 'without Rust support'"
# As DKMS's PRE_BUILD (--or-carried): no error, the reason and carried mode.
insh rust-headers-or-carried-no-rust "out=\$(sh src/scripts/rust-headers.sh --or-carried 1.2.3-norust /tmp/norust 2>&1); echo \"\$out\"
	echo \"\$out\" | grep -q 'without Rust support' && echo \"\$out\" | grep -q '(carried mode)'"
insh rust-headers-or-carried-no-linux-source "out=\$(NVPM_RUST_HEADERS_CACHE=/tmp/rh-oc sh src/scripts/rust-headers.sh --or-carried $KREL 2>&1); echo \"\$out\"
	echo \"\$out\" | grep -q 'apt-get install linux-source-7.3=$KPKGVER' && echo \"\$out\" | grep -q '(carried mode)' &&
	test ! -e /usr/src/linux-headers-$KREL/scripts/target.json && test ! -e /tmp/rh-oc"
# Errors that carried mode cannot cure stay errors.
insh rust-headers-or-carried-no-headers "if out=\$(sh src/scripts/rust-headers.sh --or-carried 1.2.3-none /nonexistent 2>&1); then echo \"\$out\"; exit 1; fi; echo \"\$out\"
	echo \"\$out\" | grep -q 'no headers for 1.2.3-none'"
# Headers that carry the compiled crates already (a full tree, Ubuntu's
# linux-lib-rust, Arch): used as they are, nothing built or cached.
insh rust-headers-crates-present "rm -rf /tmp/withcrates && mkdir -p /tmp/withcrates/rust /tmp/withcrates/scripts &&
	cp /usr/src/linux-headers-$KREL/.config /tmp/withcrates/ &&
	touch /tmp/withcrates/rust/libkernel.rmeta /tmp/withcrates/rust/libmacros.so /tmp/withcrates/scripts/target.json &&
	out=\$(NVPM_RUST_HEADERS_CACHE=/tmp/rh-crates sh src/scripts/rust-headers.sh $KREL /tmp/withcrates 2>&1) && echo \"\$out\" &&
	echo \"\$out\" | grep -q 'Rust-capable already' && test ! -e /tmp/rh-crates &&
	NVPM_RUST_HEADERS_CACHE=/tmp/rh-crates sh src/scripts/rust-headers.sh --dry-run $KREL /tmp/withcrates && test ! -e /tmp/rh-crates"
# arm64 headers (whose arch Makefile names no target spec: rustc's own
# aarch64 targets) with the crates are ready without scripts/target.json;
# x86's are not (x86's Makefile names one). The arm64 headers are laid out
# as Debian's: the flavour's Makefile includes the common headers', which
# hold the arch Makefile.
insh rust-headers-arm64-no-target-json "rm -rf /tmp/arm64h /tmp/arm64c && mkdir -p /tmp/arm64h/rust /tmp/arm64c/arch/arm64 &&
	printf 'CONFIG_ARM64=y\\nCONFIG_RUST=y\\n' >/tmp/arm64h/.config &&
	echo 'include /tmp/arm64c/Makefile' >/tmp/arm64h/Makefile &&
	printf 'KBUILD_RUSTFLAGS += --target=aarch64-unknown-none-softfloat\\n' >/tmp/arm64c/arch/arm64/Makefile &&
	touch /tmp/arm64h/rust/libkernel.rmeta /tmp/arm64h/rust/libmacros.so &&
	out=\$(NVPM_RUST_HEADERS_CACHE=/tmp/rh-a64 sh src/scripts/rust-headers.sh --check 7.3.4+deb13-arm64 /tmp/arm64h 2>&1) && echo \"\$out\" &&
	echo \"\$out\" | grep -q 'Rust-capable already' && test ! -e /tmp/rh-a64"
insh rust-headers-x86-needs-target-json "rm -rf /tmp/x86h && mkdir -p /tmp/x86h/rust /tmp/x86h/arch/x86 &&
	printf 'CONFIG_X86=y\\nCONFIG_RUST=y\\n' >/tmp/x86h/.config &&
	printf 'KBUILD_RUSTFLAGS += --target=\$\$(objtree)/scripts/target.json\\n' >/tmp/x86h/arch/x86/Makefile &&
	touch /tmp/x86h/rust/libkernel.rmeta /tmp/x86h/rust/libmacros.so &&
	if out=\$(NVPM_RUST_HEADERS_CACHE=/tmp/rh-x86 sh src/scripts/rust-headers.sh --check 7.3.4+deb13-amd64 /tmp/x86h 2>&1); then exit 1; fi
	echo \"\$out\"; echo \"\$out\" | grep -q 'is not Rust-capable'"
# arm64's 32-bit vDSO: Kconfig keeps COMPAT_VDSO only where the compat
# compiler is named, and modules_prepare builds the vDSO with it. Debian's
# arm64 headers name it (CROSS_COMPILE_COMPAT in .kernelvariables); where
# PATH lacks it, it is listed as missing (DKMS takes carried mode), as it is
# where the headers name none; a clang and lld kernel needs none.
insh rust-headers-arm64-compat-vdso 'rm -rf /tmp/a64c /tmp/fakecompat && mkdir -p /tmp/a64c /tmp/fakecompat
	rh() { env "$@" NVPM_RUST_HEADERS_CACHE=/tmp/rh-a64c sh src/scripts/rust-headers.sh --dry-run 7.3.4+deb13-arm64 /tmp/a64c 2>&1 || :; }
	cfg="CONFIG_ARM64=y\nCONFIG_RUST=y\nCONFIG_COMPAT_VDSO=y\n"
	printf "$cfg" >/tmp/a64c/.config
	printf "override ARCH = arm64\noverride CROSS_COMPILE_COMPAT = arm-linux-gnueabihf-\n" >/tmp/a64c/.kernelvariables
	out=$(rh); echo "$out"
	echo "$out" | grep -qF "built with arm-linux-gnueabihf-gcc, which PATH lacks (Debian: apt-get install gcc-arm-linux-gnueabihf)"
	printf "#!/bin/sh\n" >/tmp/fakecompat/arm-linux-gnueabihf-gcc && chmod +x /tmp/fakecompat/arm-linux-gnueabihf-gcc
	out=$(rh PATH=/tmp/fakecompat:$PATH); echo "$out"
	if echo "$out" | grep -q "compat vDSO"; then exit 1; fi
	printf "${cfg}CONFIG_CC_IS_CLANG=y\nCONFIG_LD_IS_LLD=y\n" >/tmp/a64c/.config
	out=$(rh); echo "$out"
	if echo "$out" | grep -q "compat vDSO"; then exit 1; fi
	printf "$cfg" >/tmp/a64c/.config && rm /tmp/a64c/.kernelvariables
	out=$(rh); echo "$out"
	echo "$out" | grep -qF "its headers do not name the 32-bit ARM compiler it was built with (CROSS_COMPILE_COMPAT)"
	test ! -e /tmp/rh-a64c'
# On Ubuntu, headers without the crates: the package that has them is named.
insh rust-headers-ubuntu-names-lib-rust "rm -rf /tmp/nocrates && mkdir -p /tmp/nocrates && cp /usr/src/linux-headers-$KREL/.config /tmp/nocrates/ &&
	printf 'NAME=Ubuntu\\nID=ubuntu\\n' >/tmp/os-release-ubuntu &&
	if out=\$(NVPM_OS_RELEASE=/tmp/os-release-ubuntu NVPM_RUST_HEADERS_CACHE=/tmp/rh-ub sh src/scripts/rust-headers.sh --dry-run $KREL /tmp/nocrates 2>&1); then echo \"\$out\"; exit 1; fi; echo \"\$out\"
	echo \"\$out\" | grep -q 'apt install linux-lib-rust-$KREL' && test ! -e /tmp/rh-ub"
insh rust-headers-dry-run-no-linux-source "if out=\$(NVPM_RUST_HEADERS_CACHE=/tmp/rh-dry sh src/scripts/rust-headers.sh --dry-run $KREL 2>&1); then echo \"\$out\"; exit 1; fi; echo \"\$out\"
	echo \"\$out\" | grep -q 'apt-get install linux-source-7.3=$KPKGVER' && test ! -e /tmp/rh-dry"
if [ "${NVPM_PKGTEST_STOP_AFTER:-}" = rust-headers ]; then finish; fi

# Without linux-source the headers of the Rust kernel cannot be made
# Rust-capable, so the build would take carried mode (DKMS's build of it is
# the 6.12 step's, below); without bindgen too, neither mode can build: the
# install fails, fast, with the reason in dpkg's output, before DKMS's
# "Consult .../make.log", and leaves the package half-configured, as README's
# Troubleshooting says.
step "dpkg -i of the DKMS package without linux-source and bindgen: the reason in dpkg's output"
inr mv /usr/bin/bindgen /usr/bin/bindgen.away
expect_rc dkms-no-toolchain-fails 1 inlog dkms-no-toolchain "dpkg -i deb/$DEB_DKMS"
inr mv /usr/bin/bindgen.away /usr/bin/bindgen
check dkms-no-toolchain-reason awk -v r="rust-toolchain: carried mode (the kernel has no usable Rust) needs: bindgen>=" \
	-v k="nvidia-peer-memory-dkms: DKMS cannot build nvidia_peermem for $KREL: install the above, then: dpkg --configure -a" \
	-v m="Consult /var/lib/dkms/nvidia-peer-memory/$V/build/make.log" '
	!R && index($0, r) { R = NR } !K && index($0, k) { K = NR } !M && index($0, m) { M = NR }
	END { if (!(R && K && M && R < M && K < M)) { print "lines: reason " R ", hint " K ", make.log " M; exit 1 } }' "$LOGS/dkms-no-toolchain.log"
# PRE_BUILD fell back to carried mode (no linux-source), whose toolchain check stopped the build.
insh dkms-no-toolchain-make-log "grep -q 'linux-source: no /usr/src/linux-source-7.3.tar.xz' /var/lib/dkms/nvidia-peer-memory/$V/build/make.log &&
	grep -q '(carried mode)' /var/lib/dkms/nvidia-peer-memory/$V/build/make.log &&
	grep -q 'needs: bindgen>=' /var/lib/dkms/nvidia-peer-memory/$V/build/make.log"
insh dkms-no-toolchain-half-configured "dpkg -s nvidia-peer-memory-dkms | grep -qx 'Status: install ok half-configured'"
insh dkms-tree-carried-src "/usr/src/nvidia-peer-memory-$V/kbuild/carried-source.sh --verify /usr/src/nvidia-peer-memory-$V/carried-src"
insh dkms-ready-carried "/usr/lib/nvidia-peer-memory/dkms-ready $KREL | grep -qx '$KREL: carried mode (the pinned Rust crates built into the module)'"
insh dkms-ready-names-missing "rc=0; BINDGEN=/nonexistent /usr/lib/nvidia-peer-memory/dkms-ready $KREL 2>/tmp/err || rc=\$?; cat /tmp/err
	test \$rc = 1 && grep -q 'needs: bindgen>=' /tmp/err && grep -q 'install: rustc rust-src bindgen libclang-dev' /tmp/err"
if inlog dkms-no-toolchain-purge "dpkg --purge nvidia-peer-memory-dkms && test ! -e /var/lib/dkms/nvidia-peer-memory"; then
	ok dkms-no-toolchain-purge; else bad dkms-no-toolchain-purge "see $LOGS/dkms-no-toolchain-purge.log"; fi
step "installing linux-source-7.3 from the root's apt cache"
inlog linux-source "apt-get install -y --no-download --no-install-recommends linux-source-7.3=$KPKGVER" ||
	bad linux-source "see $LOGS/linux-source.log"
# The root has headers, not kernel images: give the kernel the module index
# its linux-modules package would have (DKMS runs depmod only where one exists).
inr depmod -a "$KREL"
insh rust-headers-dry-run-ready "NVPM_RUST_HEADERS_CACHE=/tmp/rh-dry sh src/scripts/rust-headers.sh --dry-run $KREL | grep -q 'can be made Rust-capable' &&
	test ! -e /tmp/rh-dry && test ! -e /usr/src/linux-headers-$KREL/scripts/target.json"
snapshot >"$RUN/before.lst"

# --- DKMS: the real Rust module against Debian's stock headers --------------------------------
RH_CACHE=$NVPM_CACHE/rust-headers
if [ -z "${NVPM_PKGTEST_COLD:-}" ] && [ -d "$RH_CACHE" ]; then
	mkdir -p "$ROOT/var/cache/nvidia-peer-memory/rust-headers"
	cp -a "$RH_CACHE/." "$ROOT/var/cache/nvidia-peer-memory/rust-headers/"
	rm -f "$ROOT"/var/cache/nvidia-peer-memory/rust-headers/*/installed
	step "seeded the Rust overlay cache from $RH_CACHE"
fi
save_overlays() {
	local d
	for d in "$ROOT"/var/cache/nvidia-peer-memory/rust-headers/*/*/.complete; do
		[ -e "$d" ] || continue
		d=$(dirname "$d")
		local k=${d#"$ROOT"/var/cache/nvidia-peer-memory/rust-headers/}
		[ -e "$RH_CACHE/$k/.complete" ] && continue
		mkdir -p "$RH_CACHE/$(dirname "$k")" && cp -a "$d" "$RH_CACHE/$k.tmp" && mv "$RH_CACHE/$k.tmp" "$RH_CACHE/$k"
	done
}
step "dpkg -i of both packages: DKMS builds nvidia_peermem for $KREL (the Rust overlay once per kernel: 2-4 minutes cold)"
(cd "$ROOT/build/deb" && cp "$DEB_MAIN" "$DEB_DKMS" ../)
# policy-rc.d lets invoke-rc.d start the service in this chroot, where it
# cannot (no module for the running kernel): the install must still succeed.
if inlog_progress dpkg-install "printf '#!/bin/sh\nexit 0\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && dpkg -i $DEB_DKMS $DEB_MAIN"; then ok dpkg-install; else
	bad dpkg-install "$(tail -n 15 "$LOGS/dpkg-install.log"; tail -n 30 "$ROOT"/var/lib/dkms/nvidia-peer-memory/"$V"/build/make.log 2>/dev/null)"; fi
save_overlays
cp "$ROOT/var/lib/dkms/nvidia-peer-memory/$V/$KREL/x86_64/log/make.log" "$LOGS/dkms-make-$KREL.log" 2>/dev/null
grep -E 'rust-headers: .*(built in|Rust-capable)' "$LOGS/dkms-make-$KREL.log" | sed 's/^/    /'
insh dkms-installed "dkms status -m nvidia-peer-memory | tee /dev/stderr | grep -q '^nvidia-peer-memory/$V, $KREL, x86_64: installed'"
KO=/lib/modules/$KREL/updates/dkms/nvidia_peermem.ko
insh module-installed "ls $KO* && modinfo -F vermagic $KO* | grep -q '^$KREL ' && test \"\$(modinfo -F version $KO*)\" = $V"
insh module-depmod "modinfo -k $KREL -F filename nvidia_peermem | grep -q updates/dkms/nvidia_peermem.ko"
insh module-undefined-symbols "modinfo -F depends $KO*; test -n \"\$(modinfo -F name $KO*)\""
insh headers-rust-capable "/usr/lib/nvidia-peer-memory/rust-headers --check $KREL && test -f /usr/src/linux-headers-$KREL/rust/libkernel.rmeta"
# Its manifest says the overlay is in place; a file the headers lost since
# (headers unpacked again) is copied back, not trusted to be there.
insh rust-headers-restores-overlay "rm /usr/src/linux-headers-$KREL/rust/libkernel.rmeta &&
	out=\$(/usr/lib/nvidia-peer-memory/rust-headers $KREL) && echo \"\$out\" && echo \"\$out\" | grep -q 'is Rust-capable (.* files from' &&
	test -f /usr/src/linux-headers-$KREL/rust/libkernel.rmeta && /usr/lib/nvidia-peer-memory/rust-headers $KREL | grep -q 'in place'"
# DKMS's MOK is at the paths README gives for `mokutil --import` (its
# framework.conf's defaults); with openssl in the root, dkms made it at its
# first build and signed the module with it.
insh dkms-signing-mok "grep -Eq '^#? *mok_signing_key=\"?/var/lib/dkms/mok.key' /etc/dkms/framework.conf
	grep -Eq '^#? *mok_certificate=\"?/var/lib/dkms/mok.pub' /etc/dkms/framework.conf
	if command -v openssl >/dev/null; then test -s /var/lib/dkms/mok.pub && modinfo -F signer $KO* | grep -q .; fi"
insh postinst-did-not-fail "dpkg -s nvidia-peer-memory | grep -q 'Status: install ok installed' && dpkg -s nvidia-peer-memory-dkms | grep -q 'Status: install ok installed'"
# The doctor as installed. This root's /sys is an empty tmpfs (nothing loaded)
# and /proc the host's; the kernel release is the host's.
insh doctor-version "test \"\$(nvidia-peermem-doctor --version)\" = 'nvidia-peermem-doctor $V' && test \"\$(command -v nvidia-peermem-doctor)\" = /usr/bin/nvidia-peermem-doctor"
insh doctor-json "rc=0; nvidia-peermem-doctor --json >/tmp/doctor.json || rc=\$?; test \$rc = 1
	python3 doctor-json.py /tmp/doctor.json \$rc $V check:module.loaded=FAIL facts.module.loaded=false \"facts.kernel_release=\$(uname -r)\" stats=null"
insh doctor-table "rc=0; nvidia-peermem-doctor >/tmp/doctor.txt || rc=\$?; test \$rc = 1
	head -n1 /tmp/doctor.txt | grep -qx 'nvidia-peermem-doctor $V: GPUDirect RDMA checks (root /)'
	grep -Eq '^FAIL +module.loaded +nvidia_peermem is not loaded ' /tmp/doctor.txt && grep -Eq '^Result: blocked \([0-9]+ blocking, [0-9]+ warnings?\), exit status 1\$' /tmp/doctor.txt"
insh doctor-usage-error "rc=0; nvidia-peermem-doctor --bogus 2>/tmp/err || rc=\$?; test \$rc = 2 && grep -qx \"nvidia-peermem-doctor: invalid option '--bogus'\" /tmp/err"
insh doctor-manpage "zcat /usr/share/man/man1/nvidia-peermem-doctor.1.gz | grep -q '^.SH EXIT STATUS'"
check postinst-start-failure-tolerated grep -q 'nv_peer_mem did not start now' "$LOGS/dpkg-install.log"
insh rc-links "ls /etc/rc2.d/S*nv_peer_mem && ls /etc/rc0.d/K*nv_peer_mem && test -L /etc/systemd/system/multi-user.target.wants/nv_peer_mem.service"
insh systemd-analyze-verify "systemd-analyze verify --man=no /usr/lib/systemd/system/nv_peer_mem.service 2>/tmp/err; rc=\$?; cat /tmp/err; test \$rc = 0 && test ! -s /tmp/err"
insh modprobe-config "modprobe -c | grep -qx 'softdep nvidia_peermem pre: ib_core nvidia' &&
	printf 'install nvidia_peermem modprobe nvidia ; modprobe -i nvidia-current-peermem \$CMDLINE_OPTS\n' >/etc/modprobe.d/nvidia.conf &&
	modprobe -c | grep '^install nvidia_peermem' | head -n1 | grep -q -- '--ignore-install nvidia_peermem'; rc=\$?; rm -f /etc/modprobe.d/nvidia.conf; exit \$rc"

# --- the service, with a stand-in kmod ---------------------------------------------------------
step "nv_peer_mem service: start/stop/status/restart with a stand-in kmod"
cp tests/packaging/fake-kmod "$ROOT/tmp/fake-kmod" && chmod +x "$ROOT/tmp/fake-kmod"
mount --bind "$ROOT/tmp/fake-kmod" "$ROOT/usr/bin/kmod"
F=/run/nvpm-fake
avail() { # modules that "exist": name=path ...
	inr sh -c 'rm -rf /run/nvpm-fake /sys/module; mkdir -p /run/nvpm-fake /sys/module; for a in "$@"; do echo "${a%%=*} ${a#*=}"; done >/run/nvpm-fake/available' sh "$@"
}
svc() { inr service nv_peer_mem "$@"; }
OURS=/lib/modules/x/updates/dkms/nvidia_peermem.ko.xz
avail ib_core=/k/ib_core.ko nvidia=/k/nvidia.ko nvidia_peermem=$OURS
expect_rc service-status-not-loaded 3 svc status
avail ib_core=/k/ib_core.ko nvidia_peermem=$OURS
expect_rc service-start-no-gpu-driver 1 svc start
check service-start-no-gpu-driver-message inr sh -c "service nv_peer_mem start 2>&1 | grep -q 'required module nvidia'"
avail ib_core=/k/ib_core.ko nvidia=/k/nvidia.ko
expect_rc service-start-not-installed 5 svc start
avail ib_core=/k/ib_core.ko nvidia=/k/nvidia.ko nvidia_peermem=/lib/modules/x/updates/dkms/nvidia-peermem.ko
expect_rc service-start-nvidia-bundled-module 6 svc start
avail ib_core=/k/ib_core.ko nvidia=/k/nvidia.ko nvidia_peermem=$OURS
expect_rc service-start 0 svc start
check service-start-loaded-all inr sh -c "test -d /sys/module/nvidia_peermem && test -d /sys/module/ib_core && test -d /sys/module/nvidia &&
	test \$(grep -cx 'modprobe nvidia_peermem' $F/calls) = 1"
# service nv_peer_mem doctor: the doctor, its arguments and exit status; it
# sees what the service loaded (directories in this root's /sys/module).
insh service-doctor "rc=0; service nv_peer_mem doctor --json >/tmp/svc-doctor.json || rc=\$?
	python3 doctor-json.py /tmp/svc-doctor.json \$rc $V check:module.loaded=OK facts.module.loaded=true facts.nvidia_driver.loaded=true
	nvidia-peermem-doctor --json >/tmp/direct-doctor.json || :; cmp /tmp/svc-doctor.json /tmp/direct-doctor.json"
# (service takes --help and --version for itself; the doctor's other options pass.)
insh service-doctor-verbose "service nv_peer_mem doctor --verbose >/tmp/svc-doctor.txt || :
	head -n1 /tmp/svc-doctor.txt | grep -qx 'nvidia-peermem-doctor $V: GPUDirect RDMA checks (root /)'
	grep -Eq '^OK +module.loaded +nvidia_peermem is loaded\$' /tmp/svc-doctor.txt && grep -Eq '^ +- initstate: unknown\$' /tmp/svc-doctor.txt"
expect_rc service-doctor-usage-error 2 svc doctor --bogus
expect_rc service-doctor-not-installed 5 inr env PATH=/nonexistent /usr/lib/nvidia-peer-memory/nv_peer_mem doctor
expect_rc service-status-loaded 0 svc status
expect_rc service-start-again 0 svc start
check service-start-again-no-modprobe inr sh -c "test \$(grep -cx 'modprobe nvidia_peermem' $F/calls) = 1"
expect_rc service-restart 0 svc restart
check service-restart-reloaded inr sh -c "grep -qx 'rmmod nvidia_peermem' $F/calls && test \$(grep -cx 'modprobe nvidia_peermem' $F/calls) = 2 && test -d /sys/module/nvidia_peermem"
expect_rc service-stop 0 svc stop
check service-stop-keeps-driver inr sh -c "test ! -d /sys/module/nvidia_peermem && test -d /sys/module/nvidia && test -d /sys/module/ib_core && ! grep -q 'modprobe -r' $F/calls"
insh service-doctor-stopped "rc=0; service nv_peer_mem doctor --json >/tmp/svc-doctor.json || rc=\$?; test \$rc = 1
	python3 doctor-json.py /tmp/svc-doctor.json \$rc $V check:module.loaded=FAIL facts.module.loaded=false facts.nvidia_driver.loaded=true"
expect_rc service-stop-again 0 svc stop
expect_rc service-bad-verb 2 svc frobnicate
inr sed -i 's/^ONBOOT=yes/ONBOOT=no/' /etc/infiniband/nv_peer_mem.conf
avail ib_core=/k/ib_core.ko nvidia=/k/nvidia.ko nvidia_peermem=$OURS
expect_rc service-onboot-no-start 0 svc start
check service-onboot-no-not-loaded inr test ! -d /sys/module/nvidia_peermem
# restart (a package upgrade's too) follows start: nothing loaded, nothing unloaded.
expect_rc service-onboot-no-restart 0 svc restart
check service-onboot-no-restart-not-loaded inr sh -c "test ! -d /sys/module/nvidia_peermem && ! grep -q 'modprobe nvidia_peermem' $F/calls"
inr modprobe nvidia_peermem
expect_rc service-onboot-no-restart-loaded 0 svc restart
check service-onboot-no-restart-keeps-module inr sh -c "test -d /sys/module/nvidia_peermem && ! grep -q '^rmmod' $F/calls &&
	service nv_peer_mem force-reload | grep -q 'not restarting nvidia_peermem: ONBOOT=no in /etc/infiniband/nv_peer_mem.conf'"
expect_rc systemd-execcondition-onboot-no 1 inr /usr/lib/nvidia-peer-memory/nv_peer_mem onboot
inr sed -i 's/^ONBOOT=no/ONBOOT=yes/' /etc/infiniband/nv_peer_mem.conf
expect_rc systemd-execcondition-onboot-yes 0 inr /usr/lib/nvidia-peer-memory/nv_peer_mem onboot
# Removal while the module is in use: the stop fails (SysV: the prerm's
# invoke-rc.d); the prerm warns, the removal succeeds, the module stays.
avail ib_core=/k/ib_core.ko nvidia=/k/nvidia.ko nvidia_peermem=$OURS
expect_rc service-start-before-remove 0 svc start
inr sh -c "echo nvidia_peermem >$F/in-use"
expect_rc service-stop-in-use 1 svc stop
if inlog remove-in-use "dpkg -r nvidia-peer-memory"; then ok dpkg-remove-module-in-use; else
	bad dpkg-remove-module-in-use "$(tail -n 15 "$LOGS/remove-in-use.log")"; fi
check dpkg-remove-module-in-use-warns grep -q 'nvidia-peer-memory: nv_peer_mem did not stop; nvidia_peermem stays loaded' "$LOGS/remove-in-use.log"
insh dpkg-remove-module-in-use-state "test -d /sys/module/nvidia_peermem && dpkg -s nvidia-peer-memory | grep -qx 'Status: deinstall ok config-files'"
# Installed again; its postinst's restart reloads the module.
if inlog reinstall "rm -f $F/in-use && dpkg -i $DEB_MAIN"; then ok dpkg-reinstall-after-remove; else
	bad dpkg-reinstall-after-remove "$(tail -n 15 "$LOGS/reinstall.log")"; fi
check dpkg-reinstall-reloaded inr sh -c "test -d /sys/module/nvidia_peermem && grep -qx 'rmmod nvidia_peermem' $F/calls"
umount "$ROOT/usr/bin/kmod"
inr rm -rf /run/nvpm-fake
inr sh -c 'rm -rf /sys/module'

# --- a new kernel --------------------------------------------------------------------------------
step "new kernel: apt-get install linux-headers-$KREL2 -> DKMS builds for it (its Rust overlay: 2-4 minutes cold)"
if inlog_progress kernel-upgrade "apt-get install -y --no-download --no-install-recommends linux-headers-$KREL2=$KPKGVER"; then
	ok kernel-upgrade-install; else bad kernel-upgrade-install "see $LOGS/kernel-upgrade.log"; fi
save_overlays
insh kernel-upgrade-built "dkms status -m nvidia-peer-memory | tee /dev/stderr | grep -q '^nvidia-peer-memory/$V, $KREL2, x86_64: installed' &&
	modinfo -F vermagic /lib/modules/$KREL2/updates/dkms/nvidia_peermem.ko* | grep -q '^$KREL2 '"
insh kernel-upgrade-first-kept "dkms status -m nvidia-peer-memory | grep -q '^nvidia-peer-memory/$V, $KREL, x86_64: installed' &&
	/usr/lib/nvidia-peer-memory/rust-headers --check $KREL"
# Drop the second kernel again: the upgrades below rebuild one kernel, not two.
# Its headers' removal fires the trigger, which takes the Rust overlay out.
if inlog kernel-remove "dkms remove nvidia-peer-memory/$V -k $KREL2 && apt-get purge -y --autoremove linux-headers-$KREL2"; then
	ok kernel-remove; else bad kernel-remove "see $LOGS/kernel-remove.log"; fi
check kernel-remove-overlay-gone inr sh -c "test ! -e /usr/src/linux-headers-$KREL2 && test ! -e /var/cache/nvidia-peer-memory/rust-headers/$KREL2/installed"

# --- kernels without Rust -------------------------------------------------------------------------
# Debian 13's and Debian 12's default kernels (6.12, 6.1), built without
# Rust, with symbol versions (MODVERSIONS through genksyms). Each arrives as
# a new kernel does: its headers packages, as the kernels suite fetched them
# (scripts/provision-carried.sh), installed as on a host before the driver's
# and OFED's modules for it, so DKMS's autoinstall skips it and says why;
# then those modules (the simulators built for it, install_exporters), whose
# packages' trigger (dkms-rebuild) builds the module in carried mode with
# their CRCs. Then Debian's image of that kernel boots it with Debian's
# ib_core: the load test, 02 (symbol versions; refused beside another build
# of the GPU driver), the client scenarios (40-45), one window mode of 51
# and one configuration of 55; and the .ko is read as the kernel's .config
# asks (tests/kocheck). (--force-depends: the image the headers name is not
# needed for a build.)
CARRIED_GUEST_ENV="STRESS_WINDOW_MODES=modern STRESS_CONFIGS=modern-revocable STRESS_CONC_OPS=20000"
# The simulators built for a kernel (tests/sim) stand in for the NVIDIA
# driver's and OFED's modules (no driver can load without a GPU, and MOFED's
# packages are not in Debian's archive): installed where their DKMS packages
# put them for that kernel (updates/dkms; the driver's xz-compressed, as
# DKMS 3.2.2 compresses for a kernel with CONFIG_MODULE_COMPRESS_XZ) and
# indexed by depmod, as after `dkms install`.
exporters_at() { echo "/lib/modules/$1/updates/dkms"; }
install_exporters() { # KREL
	local at
	at=$ROOT$(exporters_at "$1")
	mkdir -p "$at"
	if ! { xz -c tests/sim/nvidia.ko >"$at/nvidia.ko.xz" && cp tests/sim/mofed_peer_sim.ko "$at/" && inr depmod "$1"; }; then
		bad "exporters-$1" "cannot install the simulators for $1"
		return 1
	fi
}
# check_crcs_taken NAME KREL: the installed nvidia_peermem.ko for KREL carries
# the CRCs the simulators' own build wrote (tests/sim/Module.symvers).
check_crcs_taken() {
	check "$1-crcs" sh -c "f=\$(ls '$ROOT'/lib/modules/$2/updates/dkms/nvidia_peermem.ko*) &&
		case \$f in *.xz) xz -dc \$f ;; *.zst) zstd -dcq \$f ;; *) cat \$f ;; esac >'$ROOT/tmp/crcs.ko' &&
		chroot '$ROOT' modprobe --dump-modversions /tmp/crcs.ko >'$ROOT/tmp/crcs' && n=0 &&
		for s in nvidia_p2p_get_pages nvidia_p2p_dma_map_pages nvidia_p2p_put_pages ib_register_peer_memory_client ib_unregister_peer_memory_client; do
			want=\$(awk -v s=\$s '\$2 == s { print \$1 }' tests/sim/Module.symvers)
			got=\$(awk -v s=\$s '\$2 == s { print \$1 }' '$ROOT/tmp/crcs')
			[ -n \"\$want\" ] && [ \$((want)) = \$((got)) ] || { echo \"\$s: \$got in the module, \$want in tests/sim/Module.symvers\"; exit 1; }
		done"
}
# real_tables NAME MODULES SYMVERS: find-symvers.sh reads the CRCs of a real
# kernel's RDMA core modules as that kernel's build wrote them in its
# Module.symvers (tests/neighbours/real-tables.sh).
real_tables() { tool_results tests/neighbours/real-tables.sh "packaging/$1-crc-tables" "$2" "$3"; }
# In the trixie root, for the kernel of kernel-SERIES.env (its own namespace).
kroot() { env -u NVPM_IN_NS NVPM_KERNEL_ENV="kernel-$1.env" scripts/in-chroot.sh "${@:2}"; }
carried_dkms() {
	local series=$1 kenv=$NVPM_CACHE/kernel-$1.env nrel debs kconfig n=dkms-$1 mlog ko=$REPO/build/dkms-$1
	if ! KSERIES=$series scripts/provision-carried.sh "$series" >"$LOGS/$n-provision.log" 2>&1; then
		bad "$n-provision" "$(tail -n 15 "$LOGS/$n-provision.log")"
		return
	fi
	local dmods
	# shellcheck source=/dev/null disable=SC2153 # KREL, CHROOT, KROOT, KDIR_HOST, DEBIAN_MODULES: the file's
	read -r nrel debs kconfig dmods <<<"$(. "$kenv" && echo "$KREL $CHROOT$KROOT/debs $KDIR_HOST/.config $DEBIAN_MODULES")"
	real_tables "$n" "$dmods" "${kconfig%/.config}/Module.symvers"
	step "Debian's $nrel (no Rust): another build of the GPU driver, then the simulators for it"
	# Another build of the GPU driver, for the guest's refusal (02): the GPU
	# simulator built from a real driver's nv-p2p.h (550's, page-table ABI
	# 1.2: Debian's nvidia-open-kernel-source, as the anchor suite fetches
	# it), whose nvidia_p2p_* CRCs are not those of the simulator built next,
	# which the module is built against. Built first: both build in tests/sim.
	local other=$REPO/build/$n-other asrc
	rm -rf "$other" && mkdir -p "$other"
	if asrc=$(kroot "$series" tests/anchor/build.sh --fetch 2>"$LOGS/$n-other-driver.log") &&
		kroot "$series" sh -c 'make --no-print-directory KDIR="$KDIR" KMAKE_FLAGS="$KMAKE_FLAGS" NVPM_SIM_NV_P2P_H="$1" NVPM_SIM_EXPORT=EXPORT_SYMBOL sims' \
			sh "$asrc/nvidia-peermem/nv-p2p.h" >>"$LOGS/$n-other-driver.log" 2>&1 &&
		cp tests/sim/nvidia.ko "$other/nvidia-other.ko" && awk '$2 ~ /^nvidia_p2p_/' tests/sim/Module.symvers >"$other/crcs"; then
		ok "$n-other-driver"; else bad "$n-other-driver" "see $LOGS/$n-other-driver.log"; fi
	if kroot "$series" sh -c 'make --no-print-directory KDIR="$KDIR" KMAKE_FLAGS="$KMAKE_FLAGS" sims' >"$LOGS/$n-sims.log" 2>&1; then
		ok "$n-sims"
	else
		bad "$n-sims" "$(tail -n 15 "$LOGS/$n-sims.log")"
		return
	fi
	check "$n-sims-crcs" awk '$2 ~ /^nvidia_p2p_|_peer_memory_client$/ { n++; if ($1 ~ /^0x0+$/) z++ }
		END { if (n < 5 || z) { print n " entries, " z " of them 0"; exit 1 } }' tests/sim/Module.symvers
	check "$n-other-driver-crcs-differ" awk '$2 ~ /^nvidia_p2p_/ && NR == FNR { other[$2] = $1; next }
		$2 ~ /^nvidia_p2p_/ && ($2 in other) && other[$2] != $1 { n++ }
		END { if (n < 5) { print n " nvidia_p2p_* CRCs differ"; exit 1 } }' "$other/crcs" tests/sim/Module.symvers

	# A new kernel before the driver's and OFED's modules for it: DKMS skips
	# it (dkms.conf), the headers' installation succeeds, and the reason is
	# printed.
	step "a new MODVERSIONS kernel: dpkg -i linux-headers-$nrel before the driver's and OFED's modules"
	rm -rf "$ROOT/tmp/norust-debs" && mkdir -p "$ROOT/tmp/norust-debs"
	cp "$debs"/linux-headers-*.deb "$debs"/linux-kbuild-*.deb "$ROOT/tmp/norust-debs/"
	local nlog=$LOGS/$n-no-exporters.log blog=/var/lib/dkms/nvidia-peer-memory/$V/build/make.log
	if inlog_progress "$n-no-exporters" "dpkg -i --force-depends /tmp/norust-debs/*.deb"; then ok "$n-no-exporters-installs"; else
		bad "$n-no-exporters-installs" "see $nlog"; fi
	insh "$n-no-exporters-not-installed" "! dkms status -m nvidia-peer-memory -k $nrel | grep -q installed"
	check "$n-no-exporters-says-why" sh -c "grep -q \"nvidia-peer-memory: not built for $nrel yet, it is built when the modules it imports from are installed\" '$nlog' &&
		grep -q \"the NVIDIA driver's (nvidia_p2p_get_pages): no module of $nrel exports it; install\" '$nlog' &&
		grep -q \"the RDMA core's (ib_register_peer_memory_client): no module of $nrel exports it\" '$nlog' &&
		grep -q 'mlnx-ofed-kernel-dkms' '$nlog'"
	check "$n-no-exporters-skipped" grep -q "Autoinstall on $nrel was skipped for module(s) nvidia-peer-memory" "$nlog"
	# Skipped before compiling anything (it once went on to modpost's "undefined!").
	insh "$n-no-exporters-stops-first" "! grep -qs '$nrel' $blog"

	# The driver's and OFED's modules arrive; their packages' trigger runs
	# dkms-rebuild, which builds for the kernel DKMS skipped.
	install_exporters "$nrel" || return
	step "the exporters installed: dkms-rebuild (their packages' trigger) builds nvidia_peermem for $nrel in carried mode with their CRCs"
	if inlog_progress "$n" "/usr/lib/nvidia-peer-memory/dkms-rebuild" &&
		grep -q "building nvidia-peer-memory $V for $nrel (the modules it imports from are installed now)" "$LOGS/$n.log"; then
		ok "$n-install"; else
		bad "$n-install" "$(cat "$LOGS/$n.log"; grep -E 'error|Error' "$ROOT$blog" 2>/dev/null | head -n 15)"; fi
	# A failed build leaves its log in DKMS's build tree only.
	mlog=$LOGS/dkms-make-$nrel.log
	cp "$ROOT/var/lib/dkms/nvidia-peer-memory/$V/$nrel/x86_64/log/make.log" "$mlog" 2>/dev/null ||
		cp "$ROOT/var/lib/dkms/nvidia-peer-memory/$V/build/make.log" "$mlog" 2>/dev/null
	insh "$n-built" "dkms status -m nvidia-peer-memory | tee /dev/stderr | grep -q '^nvidia-peer-memory/$V, $nrel, x86_64: installed' &&
		modinfo -F vermagic /lib/modules/$nrel/updates/dkms/nvidia_peermem.ko* | grep -q '^$nrel '"
	check "$n-reason" grep -q "kernel $nrel is built without Rust support" "$mlog"
	check "$n-carried" grep -q '^nvidia_peermem: Rust support: carried' "$mlog"
	check "$n-crcs-found" grep -qF "CONFIG_MODVERSIONS=y: CRCs from $(exporters_at "$nrel")/nvidia.ko.xz $(exporters_at "$nrel")/mofed_peer_sim.ko" "$mlog"
	check_crcs_taken "$n" "$nrel"
	insh "$n-dkms-ready" "/usr/lib/nvidia-peer-memory/dkms-ready $nrel | grep -qx '$nrel: carried mode (the pinned Rust crates built into the module)'"
	insh "$n-first-kept" "dkms status -m nvidia-peer-memory | grep -q '^nvidia-peer-memory/$V, $KREL, x86_64: installed'"
	rm -rf "$ko" && mkdir -p "$ko"
	if inr sh -c "f=\$(ls /lib/modules/$nrel/updates/dkms/nvidia_peermem.ko*) && case \$f in *.xz) xz -dc \$f ;; *.zst) zstd -dcq \$f ;; *) cat \$f ;; esac" \
		>"$ko/nvidia_peermem.ko"; then
		# The kernel's static rules (objtool, IBT, thunks, padding) on the DKMS-built .ko.
		python3 tests/kocheck/check-ko.py --name "packaging/$n/kocheck" "$kconfig" "$ko/nvidia_peermem.ko" >"$LOGS/$n-kocheck.log" 2>&1
		sed 's/^/  /' "$LOGS/$n-kocheck.log"
		pass=$((pass + $(grep -c '^PASS' "$LOGS/$n-kocheck.log"))) fail=$((fail + $(grep -c '^FAIL' "$LOGS/$n-kocheck.log")))
		step "Debian's $nrel boots the DKMS-built module (01, 02, 40-45, 51, 55)"
		GUEST_PEERMEM_KO=build/dkms-$series/nvidia_peermem.ko GUEST_EXTRA_KO="$(echo tests/sim/*.ko)" \
			GUEST_FILES=$([ -e "$other/nvidia-other.ko" ] && echo "build/$n-other/nvidia-other.ko") \
			GUEST_SCENARIOS='0[12]-* 4[0-5]-* 51-* 55-*' GUEST_ENV=$CARRIED_GUEST_ENV GUEST_OUT=build/guest-dkms-$series \
			kroot "$series" tests/guest/run.sh >"$LOGS/$n-guest.log" 2>&1
		grep -E '^  (FAIL|SKIP) ' "$LOGS/$n-guest.log" | sed 's/^/  guest:/'
		if summary_add "$LOGS/$n-guest.log" GUEST; then
			echo "  guest on $nrel: $summary_pass passed, $summary_fail failed (log $LOGS/$n-guest.log)"
		else
			echo "  FAIL packaging/$n-guest: no guest summary, see $LOGS/$n-guest.log"
		fi
	else
		bad "$n-ko" "no nvidia_peermem.ko for $nrel in /lib/modules/$nrel/updates/dkms"
	fi
	# Gone again; the module index depmod wrote goes with it, as the image's removal would take it.
	if inlog "$n-remove" "dkms remove nvidia-peer-memory/$V -k $nrel &&
		dpkg --purge \$(for d in /tmp/norust-debs/*.deb; do dpkg-deb -f \$d Package; done) &&
		rm -rf /lib/modules/$nrel /tmp/norust-debs"; then
		ok "$n-remove"; else bad "$n-remove" "see $LOGS/$n-remove.log"; fi
}
# make check sets NVPM_PKGTEST_CARRIED=1; otherwise the kernels provisioned already.
for series in ${NVPM_CARRIED_KSERIES:-6.12 6.1}; do
	if [ -n "${NVPM_PKGTEST_CARRIED:-}" ] || [ -r "$NVPM_CACHE/kernel-$series.env" ]; then carried_dkms "$series"; else
		echo "  SKIP packaging/dkms-$series-*: Debian's $series is not provisioned (scripts/provision-carried.sh $series, or NVPM_PKGTEST_CARRIED=1)"; fi
done

# --- NVIDIA driver and OFED upgrades ---------------------------------------------------------------
step "NVIDIA driver and OFED upgrades: fake packages, the dpkg trigger rebuilds"
fakepkg() { # NAME VERSION FILE-IN-PKG SOURCE-FILE
	inr sh -ec "d=/tmp/fake-$1-$2; rm -rf \$d; mkdir -p \$d/DEBIAN \$(dirname \$d$3)
		cp $4 \$d$3 && echo '/* fake $1 $2 */' >>\$d$3
		printf 'Package: $1\nVersion: $2\nArchitecture: all\nMaintainer: test <test@test.invalid>\nDescription: packaging test stand-in\n' >\$d/DEBIAN/control
		dpkg-deb -b \$d /build/$1_$2_all.deb >/dev/null"
}
# The installed module's inode and time: a reinstall changes them (the bytes
# may well be identical: the build is reproducible).
kosum() { inr sh -c "stat -c '%i %.9Y' /lib/modules/$KREL/updates/dkms/nvidia_peermem.ko*"; }
makelog() { # NAME: copy DKMS's make.log to the logs, print its path
	inr cat "/var/lib/dkms/nvidia-peer-memory/$V/$KREL/x86_64/log/make.log" >"$LOGS/dkms-make-$1.log" 2>&1
	echo "$LOGS/dkms-make-$1.log"
}
# 575: page table ABI 1.2 (no flags word). It builds only if bindgen, the C
# shim and Kbuild's ABI check all read the vendor header, not src/ffi/'s 2.0.
inr sh -c "sed -e '/NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE/d' -e '/uint32_t flags;/d' \
	-e 's/^#define NVIDIA_P2P_PAGE_TABLE_VERSION .*/#define NVIDIA_P2P_PAGE_TABLE_VERSION 0x00010002/' \
	/build/src/src/ffi/nv-p2p.h >/tmp/nv-p2p-575.h && ! grep -q 'uint32_t flags;' /tmp/nv-p2p-575.h"
fakepkg fake-nvidia-kernel-source 575.1 /usr/src/nvidia-575.1/nvidia/nv-p2p.h /tmp/nv-p2p-575.h
fakepkg fake-nvidia-kernel-source 580.2 /usr/src/nvidia-580.2/nvidia/nv-p2p.h /build/src/src/ffi/nv-p2p.h
fakepkg fake-mlnx-ofed-kernel 24.10 /usr/src/ofa_kernel/default/include/rdma/peer_mem.h /build/src/src/ffi/peer_mem.h
sum0=$(kosum)
inlog_progress driver-install "dpkg -i fake-nvidia-kernel-source_575.1_all.deb" || bad driver-install "see $LOGS/driver-install.log"
sum1=$(kosum)
check driver-install-rebuilt sh -c "grep -q 'nv-p2p.h from /usr/src/nvidia-575.1/nvidia/nv-p2p.h' '$(makelog driver-install)' && test '$sum0' != '$sum1'"
inlog_progress driver-upgrade "dpkg -i fake-nvidia-kernel-source_580.2_all.deb" || bad driver-upgrade "see $LOGS/driver-upgrade.log"
sum2=$(kosum)
check driver-upgrade-rebuilt sh -c "grep -q 'nv-p2p.h from /usr/src/nvidia-580.2/nvidia/nv-p2p.h' '$(makelog driver-upgrade)' && test '$sum1' != '$sum2'"
check driver-upgrade-trigger-ran grep -q 'Processing triggers for nvidia-peer-memory-dkms' "$LOGS/driver-upgrade.log"
inlog_progress ofed-install "dpkg -i fake-mlnx-ofed-kernel_24.10_all.deb" || bad ofed-install "see $LOGS/ofed-install.log"
check ofed-install-rebuilt grep -q 'peer_mem.h from /usr/src/ofa_kernel/default/include/rdma/peer_mem.h' "$(makelog ofed-install)"
# An older MOFED's header (4.9: no _ex client) would not build: the rebuild
# keeps src/ffi's, and the layout is chosen at load (peerdirect_support).
inr sh -c 'echo "/* MLNX_OFED 4.9 peer_mem.h: struct peer_memory_client only */" >/tmp/peer_mem-4.9.h'
fakepkg fake-mlnx-ofed-kernel 4.9 /usr/src/ofa_kernel/default/include/rdma/peer_mem.h /tmp/peer_mem-4.9.h
inlog_progress ofed-old-install "dpkg -i fake-mlnx-ofed-kernel_4.9_all.deb" || bad ofed-old-install "see $LOGS/ofed-old-install.log"
check ofed-old-header-skipped grep -q 'peer_mem.h from src/ffi' "$(makelog ofed-old-install)"
# A driver whose header does not build: the install succeeds, the module
# and DKMS's state stay as they were.
inr sh -c 'echo "#error this GPU driver header does not build" >/tmp/broken-nv-p2p.h'
fakepkg fake-nvidia-kernel-source 580.3 /usr/src/nvidia-580.3/nvidia/nv-p2p.h /tmp/broken-nv-p2p.h
sum3=$(kosum)
if inlog_progress driver-broken "dpkg -i fake-nvidia-kernel-source_580.3_all.deb"; then ok driver-broken-install-succeeds; else
	bad driver-broken-install-succeeds "see $LOGS/driver-broken.log"; fi
check driver-broken-module-kept sh -c "test '$sum3' = '$(kosum)' && grep -q 'installed module stays as it was' '$LOGS/driver-broken.log'"
insh driver-broken-dkms-consistent "dkms status -m nvidia-peer-memory; dkms status -m nvidia-peer-memory | grep -q '^nvidia-peer-memory/$V, $KREL, x86_64: installed' &&
	grep -q 'Error' /var/lib/nvidia-peer-memory/rebuild-$KREL.log || { tail -n 30 /var/lib/nvidia-peer-memory/rebuild-$KREL.log; exit 1; }"
inlog unrelated-trigger "touch /tmp/x && dpkg-trigger --no-await /usr/src && dpkg --triggers-only -a" || :
check unrelated-trigger-no-rebuild sh -c "grep -q 'Processing triggers for nvidia-peer-memory-dkms' '$LOGS/unrelated-trigger.log' && ! grep -q rebuilding '$LOGS/unrelated-trigger.log'"
inr dpkg --purge fake-mlnx-ofed-kernel fake-nvidia-kernel-source >/dev/null 2>&1

# --- the kmod RPM, built against the now Rust-capable stock headers -------------------------------------
step "kmod RPM: rpmbuild --rebuild against /usr/src/linux-headers-$KREL"
if inlog rpmbuild-kmod "rpmbuild --rebuild --nodeps --define '_topdir /build/rpmtop-kmod' --define 'dist %{nil}' --define 'KVERSION $KREL' --define 'KDIR /usr/src/linux-headers-$KREL' $SRPM"; then
	ok rpmbuild-kmod; else bad rpmbuild-kmod "see $LOGS/rpmbuild-kmod.log"; fi
# Every filter in the rpmlintrc must be used: all packages in one run.
# (With the aarch64 RPMs: 1 source and 7 binary packages.)
if inlog rpmlint "rpmlint -r src/rpm/nvidia_peer_memory.rpmlintrc src/rpm/nvidia_peer_memory.spec $SRPM rpmtop/RPMS/*/*.rpm rpmtop-kmod/RPMS/*/*.rpm \
	rpmtop-aarch64/RPMS/*/*.rpm"; then ok rpmlint; else bad rpmlint "$(grep -E ': [EW]: |errors' "$LOGS/rpmlint.log" | head -n 20)"; fi
check rpmlint-all-packages grep -q ' 8 packages and 1 specfiles checked; 0 errors, 0 warnings' "$LOGS/rpmlint.log"
insh rpm-kmod-contents "rpm -qpl rpmtop-kmod/RPMS/x86_64/nvidia_peer_memory-kmod-$V-1.x86_64.rpm | grep -qx /lib/modules/$KREL/extra/nvidia_peermem.ko &&
	rpm -qp --scripts rpmtop-kmod/RPMS/x86_64/nvidia_peer_memory-kmod-$V-1.x86_64.rpm | grep -q 'depmod -a $KREL'"

# --- DKMS against a clang-built kernel whose headers hold its Rust crates -----------------------------
# The project's debug kernel is built with clang and Rust. It arrives as
# Debian's kernels do: its modules, then a linux-headers package whose
# postinst runs the header hooks (DKMS's autoinstall). The headers
# (scripts/debug-kernel.sh) hold the compiled Rust crates, as Ubuntu's
# linux-lib-rust adds them: DKMS builds in kernel mode with the crates as
# they are and the kernel's compiler (LLVM=-19). Then the debug kernel
# boots the DKMS-built module beside the simulators built for it (01).
# scripts/debug-kernel.sh in a mount namespace of its own (this one has the overlay).
dk() { env -u NVPM_IN_NS scripts/debug-kernel.sh "$@"; }
clang_rust_dkms() {
	local env=$NVPM_CACHE/debug-kernel.env dkrel headers modules ko=$REPO/build/clang-dkms
	if ! dk cached >/dev/null 2>&1; then
		if [ -n "${NVPM_PKGTEST_DEBUG_KERNEL:-}" ]; then
			bad clang-dkms-kernel "the debug kernel is not built (make debug-kernel)"
		else
			echo "  SKIP packaging/clang-dkms-*: the debug kernel is not built (make debug-kernel; make check builds it first)"
		fi
		return
	fi
	step "DKMS against a clang-built Rust kernel: the debug kernel's headers, with its crates"
	# Instant when cached; makes its headers tree if an older build lacks it.
	dk build >"$LOGS/debug-kernel.log" 2>&1 || { bad clang-dkms-kernel "see $LOGS/debug-kernel.log"; return; }
	# In a subshell: KREL stays the stock kernel's here.
	# shellcheck source=/dev/null disable=SC2153
	read -r dkrel headers modules <<<"$(. "$env" && echo "$KREL $HEADERS $MODULES")"
	check clang-dkms-kernel-config sh -c "grep -qx 'CONFIG_RUST=y' '$headers/.config' && grep -q '^CONFIG_CC_IS_CLANG=y' '$headers/.config'"
	if dk run sh -c 'make --no-print-directory KDIR="$KDIR" KMAKE_FLAGS="$KMAKE_FLAGS" sims' \
		>"$LOGS/clang-dkms-sims.log" 2>&1; then ok clang-dkms-sims; else
		bad clang-dkms-sims "see $LOGS/clang-dkms-sims.log"
		return
	fi
	# The kernel's modules, as its linux-image package installs them (and indexes them).
	mkdir -p "$ROOT/lib/modules" && cp -a "$modules" "$ROOT/lib/modules/$dkrel" && inr depmod "$dkrel"
	# Its headers package, built here the way Debian's are laid out.
	rm -rf "$ROOT/tmp/lh" && mkdir -p "$ROOT/tmp/lh/DEBIAN" "$ROOT/tmp/lh/usr/src" "$ROOT/tmp/lh/usr/lib/modules/$dkrel"
	cp -a "$headers" "$ROOT/tmp/lh/usr/src/linux-headers-$dkrel"
	ln -s "/usr/src/linux-headers-$dkrel" "$ROOT/tmp/lh/usr/lib/modules/$dkrel/build"
	printf 'Package: linux-headers-%s\nVersion: 1\nArchitecture: amd64\nMaintainer: test <test@test.invalid>\nDescription: packaging test: the debug kernel'"'"'s headers\n' \
		"$dkrel" >"$ROOT/tmp/lh/DEBIAN/control"
	printf '#!/bin/sh -e\nlinux-run-hooks headers postinst %s -- "$@"\nexit 0\n' "$dkrel" >"$ROOT/tmp/lh/DEBIAN/postinst"
	chmod 0755 "$ROOT/tmp/lh/DEBIAN/postinst"
	inlog clang-dkms-headers-deb "dpkg-deb -Zgzip -z1 --root-owner-group -b /tmp/lh /build/linux-headers-$dkrel.deb && rm -rf /tmp/lh" ||
		{ bad clang-dkms-headers-deb "see $LOGS/clang-dkms-headers-deb.log"; return; }

	# No symbol versions: nothing to wait for, DKMS builds at once.
	step "a clang-built Rust kernel: dpkg -i linux-headers-$dkrel, DKMS builds in kernel mode"
	if inlog_progress clang-dkms "dpkg -i linux-headers-$dkrel.deb"; then ok clang-dkms-installs; else
		bad clang-dkms-installs "see $LOGS/clang-dkms.log"; fi
	inr cat "/var/lib/dkms/nvidia-peer-memory/$V/$dkrel/x86_64/log/make.log" >"$LOGS/dkms-make-$dkrel.log" 2>&1
	insh clang-dkms-installed "dkms status -m nvidia-peer-memory -k $dkrel | grep -q '^nvidia-peer-memory/$V, $dkrel, x86_64: installed'"
	check clang-dkms-clang grep -qF "was built with clang 19: LLVM=-19" "$LOGS/dkms-make-$dkrel.log"
	check clang-dkms-crates-as-they-are grep -q "Rust-capable already" "$LOGS/dkms-make-$dkrel.log"
	check clang-dkms-kernel-mode grep -q '^nvidia_peermem: Rust support: kernel' "$LOGS/dkms-make-$dkrel.log"
	rm -rf "$ko" && mkdir -p "$ko"
	inr sh -c "f=\$(ls /lib/modules/$dkrel/updates/dkms/nvidia_peermem.ko*) && case \$f in *.xz) xz -dc \$f ;; *.zst) zstd -dcq \$f ;; *) cat \$f ;; esac" \
		>"$ko/nvidia_peermem.ko"

	step "the debug kernel boots the DKMS-built module (01)"
	GUEST_PEERMEM_KO=build/clang-dkms/nvidia_peermem.ko GUEST_EXTRA_KO="$(cd "$REPO" && echo tests/sim/*.ko)" GUEST_SCENARIOS='01-*' \
		dk run env GUEST_OUT=build/guest-clang-dkms tests/guest/run.sh >"$LOGS/clang-dkms-guest.log" 2>&1
	grep -E '^  (FAIL|SKIP) ' "$LOGS/clang-dkms-guest.log" | sed 's/^/  guest:/'
	if summary_add "$LOGS/clang-dkms-guest.log" GUEST; then
		echo "  guest on $dkrel: $summary_pass passed, $summary_fail failed (log $LOGS/clang-dkms-guest.log)"
	else
		echo "  FAIL packaging/clang-dkms-guest: no guest summary, see $LOGS/clang-dkms-guest.log"
	fi

	# Gone again, as a kernel's removal leaves it: the purge below checks the rest.
	if inlog clang-dkms-remove "dkms remove nvidia-peer-memory/$V -k $dkrel && dpkg --purge linux-headers-$dkrel &&
		rm -rf /lib/modules/$dkrel /build/linux-headers-$dkrel.deb"; then
		ok clang-dkms-remove; else bad clang-dkms-remove "see $LOGS/clang-dkms-remove.log"; fi
}
clang_rust_dkms

# --- purge ----------------------------------------------------------------------------------------
step "dpkg --purge: nothing may stay behind"
inr rm -f /usr/sbin/policy-rc.d
if inlog purge "dpkg --purge nvidia-peer-memory nvidia-peer-memory-dkms"; then ok purge; else bad purge "see $LOGS/purge.log"; fi
snapshot >"$RUN/after.lst"
check purge-leaves-nothing sh -c "! LC_ALL=C comm -13 '$RUN/before.lst' '$RUN/after.lst' | grep -v -e '^/var/lib/dkms\$' -e '^/etc/modprobe.d\$' | grep ."
insh purge-module-gone "! ls /lib/modules/*/updates/dkms/nvidia_peermem* 2>/dev/null && test ! -e /var/lib/dkms/nvidia-peer-memory &&
	test ! -e /usr/src/linux-headers-$KREL/scripts/target.json && test ! -e /usr/src/linux-headers-$KREL/rust &&
	! ls /etc/rc*.d/*nv_peer_mem 2>/dev/null && test ! -e /etc/infiniband/nv_peer_mem.conf && test ! -e /var/cache/nvidia-peer-memory"

finish
