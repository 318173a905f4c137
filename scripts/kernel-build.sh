# Building a guest kernel of the project's own from linux-source-7.3, in
# its own source copy and O= directory inside the trixie root (sourced by
# scripts/debug-kernel.sh and scripts/arm64-64k-kernel.sh). The caller sets
# CHROOT, KROOT (a provisioned tree whose debs/ may hold the source
# package), KPKGVER, DROOT (the build's directory inside the root), DIR (the
# same seen from the host), SRC and OUT (inside the root), and defines
# configure (writes $OUT/.config); ensure_built does the rest.
# shellcheck shell=bash

# Kernel builds already running elsewhere on this machine (2 cores: never two at once).
other_kernel_builds() {
	pgrep -af 'modules_prepare|scripts/Makefile\.build obj=(init|kernel|mm|fs|rust|drivers|arch/x86|arch/arm64)( |$)' || true
}

wait_for_other_builds() {
	local found
	while found=$(other_kernel_builds) && [ -n "$found" ]; do
		log "another kernel build is running, waiting: $(head -n1 <<<"$found" | cut -c1-100)"
		sleep 60
	done
}

# The linux-source-7.3 .deb provisioning downloaded, or a fresh download of the same version.
source_deb() {
	local deb
	for deb in "$CHROOT$KROOT"/debs/linux-source-7.3_*.deb "$DIR"/linux-source-7.3_*.deb; do
		[ -r "$deb" ] && [ "$(dpkg-deb -f "$deb" Version)" = "$KPKGVER" ] && { echo "$deb"; return 0; }
	done
	log "downloading linux-source-7.3 $KPKGVER"
	in_chroot sh -c "cd $DROOT && apt-get download -qq -o APT::Sandbox::User=root linux-source-7.3=$KPKGVER" >&2 ||
		die "apt-get download linux-source-7.3=$KPKGVER failed"
	echo "$DIR"/linux-source-7.3_*.deb
}

unpack_source() {
	[ -e "$DIR/.unpacked" ] && return 0
	local deb
	rm -rf "$CHROOT$SRC" "$CHROOT$OUT"
	deb=$(source_deb)
	log "unpacking linux-source-7.3 $KPKGVER from $(basename "$deb") (about 30 s)"
	dpkg-deb --fsys-tarfile "$deb" | tar -xOf - --wildcards './usr/src/linux-source-7.3.tar.xz' |
		nice -n 19 tar -xJf - -C "$DIR" || die "unpacking $deb failed"
	[ -e "$CHROOT$SRC/Makefile" ] || die "no linux-source-7.3/ in $deb"
	touch "$DIR/.unpacked"
}

# Fails listing every fragment line the final .config does not honour.
check_config() { # $1 = fragment, $2 = .config
	local line sym bad=()
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*)
			grep -qxF -- "$line" "$2" || bad+=("want $line, have: $(grep -E "^(# )?${line%%=*}[= ]" "$2" || echo absent)")
			;;
		"# CONFIG_"*" is not set")
			sym=${line#\# }
			sym=${sym%% *}
			! grep -q "^$sym=" "$2" || bad+=("want $sym unset, have: $(grep "^$sym=" "$2")")
			;;
		esac
	done <"$1"
	[ ${#bad[@]} = 0 ] && return 0
	printf '  %s\n' "${bad[@]}" >&2
	die "Kconfig did not keep the above from $1 (unmet dependencies?)"
}

# Runs "$@" in the background at low priority, printing a progress line every
# 30 s; the full output goes to $1.
run_with_progress() { # $1 = log file, $2... = command
	local logf=$1 pid n=0 t0=$SECONDS
	shift
	set -m # own process group, so an interrupt can stop the whole build
	"$@" >"$logf" 2>&1 &
	pid=$!
	set +m
	trap 'kill -- -'"$pid"' 2>/dev/null; exit 130' INT TERM
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		n=$((n + 1))
		if [ $((n % 30)) = 0 ]; then
			printf '  [%5d s] %6d lines  %s\n' $((SECONDS - t0)) "$(wc -l <"$logf")" "$(tail -n1 "$logf" | cut -c1-90)" >&2
		fi
	done
	trap - INT TERM
	wait "$pid"
}

# build_kernel NAME FLAGS TARGET...: make TARGETs at nice 19 with progress
# lines, then modules_install into $DIR/modules; sets BUILD_SECONDS.
build_kernel() {
	local name=$1 flags=$2 t0=$SECONDS
	shift 2
	# shellcheck disable=SC2086 # flags is a word list
	run_with_progress "$DIR/build.log" in_chroot nice -n 19 make -C "$SRC" O="$OUT" $flags -j"$(nproc)" "$@" || {
		grep -E 'error|Error' "$DIR/build.log" | tail -n 20 >&2
		die "$name build failed, full log: $DIR/build.log"
	}
	BUILD_SECONDS=$((SECONDS - t0))
	log "kernel built in $BUILD_SECONDS s; installing modules"
	rm -rf "$DIR/modules"
	# shellcheck disable=SC2086
	in_chroot nice -n 19 make -C "$SRC" O="$OUT" $flags INSTALL_MOD_PATH="$DROOT/modules" modules_install \
		>"$DIR/modules_install.log" 2>&1 || die "modules_install failed, see $DIR/modules_install.log"
}

# ensure_built NAME PREFIX FLAGS TARGET...: the kernel of $DIR, built once:
# under $NVPM_CACHE/.PREFIX-kernel.lock and after any other kernel build,
# the source unpacked, the caller's configure, build_kernel; marked complete
# with its make seconds. Older builds (/kernels/PREFIX-*) are named, not
# deleted.
ensure_built() {
	local name=$1 prefix=$2 t0 old
	shift 2
	mkdir -p "$DIR"
	exec 8>"$NVPM_CACHE/.$prefix-kernel.lock"
	flock -n 8 || { log "another $name build holds the lock: waiting"; flock 8; }
	if [ -e "$DIR/.complete" ]; then
		log "$name cached: $DIR"
		return 0
	fi
	wait_for_other_builds
	t0=$SECONDS
	unpack_source
	configure
	log "building the $name (at nice 19); log: $DIR/build.log"
	build_kernel "$name" "$@"
	echo "$BUILD_SECONDS" >"$DIR/.complete"
	log "$name ready in $((SECONDS - t0)) s (make: $BUILD_SECONDS s)"
	for old in "$CHROOT"/kernels/"$prefix"-*; do
		[ "$old" = "$DIR" ] || log "note: $old is an older $name; delete it to free $(du -sxh "$old" | cut -f1)"
	done
}
