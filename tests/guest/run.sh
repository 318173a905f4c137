#!/usr/bin/env bash
# Guest test runner (runs inside the trixie root, repo at /src).
# Builds an initramfs (busybox, the real kmod, a depmod'ed /lib/modules with
# Debian's ib_core and our modules), boots Debian's own vmlinuz in QEMU (TCG),
# runs tests/guest/scenarios/*.sh inside, and reads results from the serial log.
# Any WARN, BUG, Oops, KASAN report or "Unknown symbol" in dmesg is a failure
# (tests/guest/log-scan.sh), but for a KASAN report that the anchor suite
# expects where the guest showed it (tests/anchor/anchor-expected).
#
# Env: KREL, VMLINUZ, DEBIAN_MODULES (from kernel.env; `make check-debug` points
# them at the debug kernel's release, bzImage and installed modules dir);
# GUEST_SCENARIOS to pick scenarios (globs, default all); GUEST_SCENARIO_DIR
# where they are (default tests/guest/scenarios; `make bench` uses
# tests/bench); GUEST_FILES extra files for the guest's /tests (e.g.
# parameters a scenario sources); GUEST_TIMEOUT seconds (default 600);
# GUEST_OUT the output directory (default build/guest); GUEST_EXTRA_KO
# space-separated extra .ko files for /lib/modules/.../extra; GUEST_UPDATES_KO
# modules (.ko or .ko.xz) for /lib/modules/.../updates/dkms, where DKMS puts
# them, ahead of the kernel's own of the same name; GUEST_PEERMEM_KO
# the module installed as nvidia_peermem.ko (default ours; the anchor suite:
# NVIDIA's, tests/anchor/run.sh) and GUEST_EXPECTED_VERSION its version (default
# VERSION); GUEST_QEMU_ARGS
# extra QEMU options (`make bench`: -icount); GUEST_APPEND extra kernel
# parameters; GUEST_KMEMLEAK=1 to scan for leaks after the scenarios (the
# kernel needs kmemleak) and fail on any report; GUEST_SHARDS how many guests
# share the scenarios, side by side (default 1), GUEST_WEIGHTS the weights
# that balance them (default tests/guest/weights). With several, each guest's logs are in
# $GUEST_OUT/shard-K and the usual files hold them all, one after another.
# The guest's architecture is the module's (its ELF header): an x86_64 guest
# gets this root's own busybox and kmod, an aarch64 one (qemu-system-aarch64
# -M virt) those of GUEST_USERLAND (kernel-*-arm64.env, scripts/provision.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KREL:?}" "${VMLINUZ:?}" "${DEBIAN_MODULES:?}"
OUT=${GUEST_OUT:-build/guest}
ROOT=$OUT/initramfs
PEERMEM_KO=${GUEST_PEERMEM_KO:-nvidia_peermem.ko}
case $(file -b "$PEERMEM_KO") in
*x86-64*) GUEST_ARCH=x86_64 ;;
*aarch64*) GUEST_ARCH=aarch64 ;;
*) echo "guest: $PEERMEM_KO: not an x86-64 or aarch64 module" >&2; exit 1 ;;
esac
# Binaries for the guest: this root's, or a foreign architecture's userland.
UL=
if [ "$GUEST_ARCH" != "$(uname -m)" ]; then
	UL=${GUEST_USERLAND:?guest: an $GUEST_ARCH guest needs GUEST_USERLAND (provision its kernel)}
fi
# $1 of the guest's binaries, in /usr/bin or /bin (an unpacked package has no merged /usr).
ul_bin() { if [ -e "$UL/usr/bin/$1" ]; then echo "$UL/usr/bin/$1"; else echo "$UL/bin/$1"; fi; }
rm -rf "$ROOT" && mkdir -p "$ROOT"/{etc,proc,sys,dev,tmp,run,tests,usr/bin,usr/sbin,usr/lib/modules,usr/lib64}
for d in bin sbin lib lib64; do ln -s "usr/$d" "$ROOT/$d"; done # merged /usr, as in trixie

# busybox and the real kmod (with the libraries it links).
cp "$(ul_bin busybox)" "$ROOT/usr/bin/busybox"
cp "$(ul_bin kmod)" "$ROOT/usr/bin/kmod"
if [ -z "$UL" ]; then
	# kmod 33 on opens its decompressors with dlopen (ldd does not list them):
	# without them it reads no .ko.xz or .ko.zst (Debian's modules), and
	# --dump-modversions finds no __versions in a compressed ib_core.
	for lib in $(ldd /usr/bin/kmod | awk '/=>/ {print $3} /ld-linux/ {print $1}') \
		$(libdir=$(ldd /usr/bin/kmod | awk '/libc\.so/ {print $3}') && cd "$(dirname "$libdir")" && ls "$PWD"/liblzma.so.5 "$PWD"/libzstd.so.1 2>/dev/null); do
		# under its soname (cp -L), in the directory it really lives in (merged /usr)
		dir=$(dirname "$(readlink -f "$lib")") && mkdir -p "$ROOT$dir" && cp -L "$lib" "$ROOT$dir/$(basename "$lib")"
	done
	interp=$(ldd /usr/bin/kmod | awk '/ld-linux/ {print $1}') # the loader at the path binaries name
	[ -e "$ROOT$interp" ] || cp -L "$interp" "$ROOT$interp"
else
	# No ldd for another architecture: the userland's libraries and loader, all of them.
	(cd "$UL" && find usr/lib -maxdepth 2 \( -name '*.so*' -o -name 'ld-linux*' \) \( -type f -o -type l \)) |
		while IFS= read -r lib; do mkdir -p "$ROOT/$(dirname "$lib")" && cp -P "$UL/$lib" "$ROOT/$lib"; done
fi
for t in modprobe insmod rmmod lsmod modinfo depmod; do ln -sf /usr/bin/kmod "$ROOT/usr/sbin/$t"; done

# Debian's modules.dep, computed once per kernel tree.
[ -s "$DEBIAN_MODULES/modules.dep" ] || depmod -b "${DEBIAN_MODULES%/lib/modules/*}" "$KREL" 2>/dev/null
MODDIR=$ROOT/usr/lib/modules/$KREL
mkdir -p "$MODDIR/extra"
touch "$MODDIR"/modules.order "$MODDIR"/modules.builtin "$MODDIR"/modules.builtin.modinfo
# Debian's real ib_core and everything it needs.
need=$(awk -F: '$1 ~ /\/ib_core\.ko/ {print $1 $2}' "$DEBIAN_MODULES/modules.dep")
for m in $need; do mkdir -p "$MODDIR/$(dirname "$m")" && cp "$DEBIAN_MODULES/$m" "$MODDIR/$m"; done
cp "$PEERMEM_KO" "$MODDIR/extra/nvidia_peermem.ko"
# The simulators' driver (tests/tool) and the doctor (src/doctor), built on
# the host by `make tool`.
for tool in nvpm-tool nvidia-peermem-doctor; do
	bin=target/$GUEST_ARCH-unknown-linux-gnu/release/$tool
	[ ! -x "$bin" ] || cp "$bin" "$ROOT/usr/bin/$tool"
done
for ko in ${GUEST_EXTRA_KO:-}; do cp "$ko" "$MODDIR/extra/"; done
for ko in ${GUEST_UPDATES_KO:-}; do mkdir -p "$MODDIR/updates/dkms" && cp "$ko" "$MODDIR/updates/dkms/"; done
depmod -b "$ROOT" "$KREL"

# Scenarios and what they compare against.
[ "${GUEST_KMEMLEAK:-0}" != 1 ] || touch "$ROOT/tests/kmemleak" # init scans when this exists
cp tests/guest/lib.sh tests/guest/client-lib.sh "$ROOT/tests/"
# GUEST_SCENARIOS: one glob or several, separated by spaces.
# Split without expanding: an unquoted * would match the files here.
read -ra scenario_globs <<<"${GUEST_SCENARIOS:-*}"
for g in "${scenario_globs[@]}"; do
	for s in "${GUEST_SCENARIO_DIR:-tests/guest/scenarios}"/$g.sh; do cp "$s" "$ROOT/tests/"; done
done
for f in ${GUEST_FILES:-}; do cp "$f" "$ROOT/tests/"; done
# GUEST_ENV: KEY=VALUE words for the scenarios that read /tests/env (the stress suite's scale).
# shellcheck disable=SC2086 # one word per line
printf '%s\n' ${GUEST_ENV:-} >"$ROOT/tests/env"
cp tests/stress/lib.sh "$ROOT/tests/stress-lib.sh"
if [ -n "${GUEST_EXPECTED_VERSION:-}" ]; then echo "$GUEST_EXPECTED_VERSION"; else cat VERSION; fi >"$ROOT/tests/expected-version"
# The service files as the packages install them, Debian's `service` and
# dash (busybox sh runs its own applets, not kmod), staged for the
# packaging scenarios (3x-*.sh), which install them.
make -s --no-print-directory KDIR= install-utils DESTDIR="$PWD/$ROOT/tests/pkgroot" >/dev/null
cp /usr/sbin/service "$ROOT/usr/sbin/service"
cp "$(ul_bin dash)" "$ROOT/usr/bin/dash"
cp tests/guest/init "$ROOT/init"
chmod +x "$ROOT/init"

# Shards: GUEST_SHARDS guests boot side by side from this initramfs, each
# running whole scenarios (init's nvpm.shard=K), spread by tests/guest/shards.sh
# by their weights (GUEST_WEIGHTS, default tests/guest/weights). Default one
# guest: two help where long scenarios leave a host CPU idle (make check's
# guest suite), and slow down short runs full of module loads.
scenarios=()
for t in "$ROOT"/tests/[0-9]*.sh; do [ -e "$t" ] && scenarios+=("$(basename "$t" .sh)"); done
shards=${GUEST_SHARDS:-1}
[[ $shards =~ ^[1-9][0-9]*$ ]] || { echo "guest: GUEST_SHARDS=$shards: not a number of guests" >&2; exit 1; }
[ "$shards" -le "${#scenarios[@]}" ] || shards=${#scenarios[@]}
[ "$shards" -ge 1 ] || shards=1
if [ "$shards" -gt 1 ]; then
	plan=$(tests/guest/shards.sh "$shards" "${GUEST_WEIGHTS:-tests/guest/weights}" "${scenarios[@]}")
	for ((k = 1; k <= shards; k++)); do
		awk -v k="$k" '$1 == k { print $2 }' <<<"$plan" >"$ROOT/tests/shard-$k"
	done
fi
(cd "$ROOT" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$OUT/initramfs.cpio.gz"

# arm64: QEMU's virt board with PL011 UARTs (ttyAMA0, and ttyAMA1 from the
# second -serial); pointer authentication's cheap QEMU algorithm keeps TCG fast.
case $GUEST_ARCH in
x86_64) qemu=(qemu-system-x86_64 -accel tcg -cpu max) console=ttyS0 ;;
aarch64) qemu=(qemu-system-aarch64 -M virt -accel tcg -cpu "max,pauth-impdef=on") console=ttyAMA0 ;;
esac
# CPUs per guest (not a setting): the concurrency scenarios need more than one.
guest_cpus=2
# boot DIR [PARAM [WHAT]]: one guest, its console in DIR/serial.log and its
# second serial port (only the result and bench lines: report in
# tests/guest/lib.sh) in DIR/results.log.
boot() {
	local t0=$SECONDS
	mkdir -p "$1"
	rm -f "$1/serial.log" "$1/results.log"
	# shellcheck disable=SC2086 # GUEST_QEMU_ARGS is words
	timeout "${GUEST_TIMEOUT:-600}" "${qemu[@]}" -m 2048 -smp $guest_cpus \
		-nographic -no-reboot -serial "file:$1/serial.log" -serial "file:$1/results.log" -monitor none \
		-kernel "$VMLINUZ" -initrd "$OUT/initramfs.cpio.gz" \
		-append "console=$console panic=-1 loglevel=5 oops=panic${GUEST_APPEND:+ $GUEST_APPEND}${2:+ $2}" \
		${GUEST_QEMU_ARGS:-} >"$1/qemu.out" 2>&1 || true
	echo "guest: ${3:-finished} in $((SECONDS - t0)) s, log $1/serial.log"
}

pass=0 fail=0
# check NAME DIR: what one guest's logs in DIR say: its results, figures and
# times, whether it finished, received all its results, kept dmesg clean and
# (GUEST_KMEMLEAK=1) leaked nothing; NAME prefixes the checks of the run.
check() {
	local name=$1 dir=$2 from reported received skipped bad cpus
	tr -d '\r' <"$dir/serial.log" >"$dir/serial.log.txt" 2>/dev/null || : >"$dir/serial.log.txt"
	tr -d '\r' <"$dir/results.log" >"$dir/results.log.txt" 2>/dev/null || : >"$dir/results.log.txt"
	# Results and init's lines from their own port; from the console only if
	# that port stayed empty (a guest kernel without a second UART), where a
	# kernel message can cut into a line.
	from=$dir/results.log.txt
	if ! grep -q '^NVPM-RESULT ' "$from"; then
		from=$dir/serial.log.txt
		grep -q '^NVPM-RESULT ' "$from" && echo "guest: no results on the second serial port, reading the console's"
	fi
	grep -E '^NVPM-RESULT ' "$from" | sed 's/^NVPM-RESULT /  /' || true
	grep -E '^NVPM-FIGURES ' "$dir/serial.log.txt" | sed 's/^NVPM-FIGURES /  figures: /' || true
	echo "guest: seconds per scenario: $(sed -n 's/^NVPM-TIME //p' "$from" | paste -sd ' ' | sed 's/ \([0-9]*\) / \1, /g')"
	sed -n 's/^NVPM-TIME \([^ ]*\) [0-9]*$/\1/p' "$from" >>"$OUT/ran"
	pass=$((pass + $(grep -c '^NVPM-RESULT PASS ' "$from" || true)))
	fail=$((fail + $(grep -c '^NVPM-RESULT FAIL ' "$from" || true)))
	skipped=$(grep -c '^NVPM-RESULT SKIP ' "$from" || true)
	[ "$skipped" = 0 ] || echo "guest: $skipped check(s) skipped (SKIP lines above: not for this module)"
	if ! grep -q '^NVPM-DONE' "$from"; then
		echo "  FAIL $name/completed: the guest did not finish (crash or timeout); tail of the log:"
		tail -n 30 "$dir/serial.log.txt" | sed 's/^/    /'
		fail=$((fail + 1))
	else
		pass=$((pass + 1))
	fi
	# Every result line the scenarios reported (init's count) arrived: a port
	# that delivered nothing, or a console that cut lines, fails here.
	reported=$(sed -n 's/^NVPM-REPORTED \([0-9]*\)$/\1/p' "$from" | head -n1)
	received=$(grep -c '^NVPM-RESULT ' "$from" || true)
	if [ -z "$reported" ]; then
		# Without NVPM-DONE, completed has failed already.
		if grep -q '^NVPM-DONE' "$from"; then
			echo "  FAIL $name/results-complete: the guest sent no count of its results"
			fail=$((fail + 1))
		fi
	elif [ "$reported" != "$received" ]; then
		echo "  FAIL $name/results-complete: the scenarios reported $reported results, $received arrived ($from)"
		fail=$((fail + 1))
	else
		echo "  PASS $name/results-complete ($received)"
		pass=$((pass + 1))
	fi
	# The guest runs on the CPUs QEMU gave it (a kernel without ACPI on x86
	# gets one: SeaBIOS's MP table lists one).
	cpus=$(sed -n 's/^NVPM-CPUS \([0-9]*\)$/\1/p' "$from" | head -n1)
	if [ "$cpus" = "$guest_cpus" ]; then
		echo "  PASS $name/cpus ($cpus)"
		pass=$((pass + 1))
	else
		echo "  FAIL $name/cpus: the guest's kernel brought up ${cpus:-no} CPUs of the $guest_cpus it was given"
		fail=$((fail + 1))
	fi
	# dmesg of the whole run, dumped by init between markers.
	sed -n '/^NVPM-DMESG-BEGIN/,/^NVPM-DMESG-END/p' "$dir/serial.log.txt" >"$dir/dmesg.txt"
	# Lockdep and sleep-in-atomic reports start with WARNING: or BUG:, except
	# a few INFO: lines; what is not counted: tests/guest/log-scan.sh.
	bad=$(tests/guest/log-scan.sh "$dir/serial.log.txt" "$dir/results.log.txt")
	if [ -n "$bad" ]; then
		echo "  FAIL $name/dmesg-clean:"
		printf '%s\n' "$bad" | head -n 20 | sed 's/^/    /'
		fail=$((fail + 1))
	else
		echo "  PASS $name/dmesg-clean"
		pass=$((pass + 1))
	fi
	if [ "${GUEST_KMEMLEAK:-0}" = 1 ]; then
		sed -n '/^NVPM-KMEMLEAK-BEGIN/,/^NVPM-KMEMLEAK-END/p' "$dir/serial.log.txt" >"$dir/kmemleak.txt"
		if ! grep -q '^NVPM-KMEMLEAK-END' "$dir/kmemleak.txt"; then
			echo "  FAIL $name/kmemleak: no scan (kmemleak disabled or missing in this kernel, or the guest did not finish)"
			fail=$((fail + 1))
		elif grep -q 'unreferenced object' "$dir/kmemleak.txt"; then
			echo "  FAIL $name/kmemleak: $(grep -c 'unreferenced object' "$dir/kmemleak.txt") leak(s), full report $dir/kmemleak.txt:"
			grep -v '^NVPM-KMEMLEAK' "$dir/kmemleak.txt" | head -n 30 | sed 's/^/    /'
			fail=$((fail + 1))
		else
			echo "  PASS $name/kmemleak"
			pass=$((pass + 1))
		fi
	fi
}

echo "guest: booting $KREL (TCG), scenarios: ${#scenarios[@]}$([ "$shards" = 1 ] || echo ", $shards guests side by side")"
rm -f "$OUT"/serial.log* "$OUT"/results.log* "$OUT"/dmesg.txt "$OUT"/kmemleak.txt
rm -rf "$OUT"/shard-* "$OUT/ran"
t0=$SECONDS
if [ "$shards" = 1 ]; then
	boot "$OUT"
	check guest "$OUT"
else
	for ((k = 1; k <= shards; k++)); do
		boot "$OUT/shard-$k" "nvpm.shard=$k" "shard $k finished" &
	done
	wait
	echo "guest: all $shards finished in $((SECONDS - t0)) s"
	for ((k = 1; k <= shards; k++)); do
		echo "guest: shard $k of $shards: $(paste -sd ' ' "$ROOT/tests/shard-$k")"
		check "guest/shard-$k" "$OUT/shard-$k"
	done
	# The whole run's logs where a single guest leaves them, one shard after another.
	for f in serial.log.txt results.log.txt dmesg.txt kmemleak.txt; do
		[ -e "$OUT/shard-1/$f" ] || continue
		cat "$OUT"/shard-*/"$f" >"$OUT/$f"
	done
fi
# Every scenario ran to its end (init's NVPM-TIME line), once.
missing=$(printf '%s\n' "${scenarios[@]}" | sort | diff - <(sort "$OUT/ran") | sed -n 's/^[<>] //p' | paste -sd ' ' || true)
if [ -n "$missing" ]; then
	echo "  FAIL guest/scenarios-ran: not run to its end, or run twice: $missing"
	fail=$((fail + 1))
else
	pass=$((pass + 1))
fi
grep -m1 'Linux version' "$OUT/dmesg.txt" | sed 's/^\[[^]]*\] /guest: /' || true
echo "GUEST-SUMMARY $pass passed, $fail failed"
[ "$fail" = 0 ]
