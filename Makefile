# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Entry points (README.md):
#   make            provision what is missing, build nvidia_peermem.ko for Debian's 7.3 kernel
#   make check      host, guest (QEMU), anchor, kernels (Debian 7.2), debug-kernel, anchor-debug and packaging suites;
#                   ends with "N passed, N failed"
#   make lint       the build with CLIPPY=1 (warnings fail), rustfmt --check
#   make bench      registration benchmark in QEMU: table with targets, JSON to $BENCH_JSON
#   make bench-profile  guest instructions per function of one registration, client against bare
#   make KDIR=...   build against any Rust-enabled kernel build tree, provisioning nothing
#   make NVPM_KARCH=arm64 check-guest  the guest tests on Debian's arm64 7.3 (cross-built, QEMU TCG)
#   make check-arm64-dkms  DKMS natively in Debian's arm64 root under qemu-user (not in make check)
#   make check-debug the guest tests on the debug kernel (make debug-kernel builds it, ~27 min once)
#   make check-debug-stress  the load test and the stress suite on the debug kernel (part of make check)
#   make check-anchor the guest scenarios with NVIDIA's own nvidia-peermem (part of make check)
#   make check-anchor-debug  NVIDIA's nvidia-peermem on the debug kernel: KASAN reports its stale read (part of make check)

KDIR ?=
KMAKE_FLAGS ?=

# The kernel tree's configuration: what the build derives the architecture from.
KDIR_CONFIG := $(if $(KDIR),$(firstword $(wildcard $(KDIR)/.config $(KDIR)/include/config/auto.conf)))
# The kernel's architecture as OFED names its per-arch directory
# (/usr/src/ofa_kernel/<arch>/<release>, `uname -m` of the kernel's machine):
# from KDIR's .config, the build host's only without a tree.
OFA_ARCH := $(or $(if $(KDIR_CONFIG),$(shell sed -n -e 's/^CONFIG_X86_64=y$$/x86_64/p' -e 's/^CONFIG_ARM64=y$$/aarch64/p' $(KDIR_CONFIG))),$(shell uname -m))

# Vendor ABI headers, used when present; otherwise src/ffi/ has the project's own.
# The kernel's release: DKMS names it; else the tree's utsrelease.h, which
# `make kernelrelease` disagrees with in Debian 12's headers (6.1.192 for
# 6.1.0-56-amd64).
KREL ?= $(or $(KERNELRELEASE),$(if $(KDIR),$(or \
	$(shell sed -n 's/^\#define UTS_RELEASE "\(.*\)"$$/\1/p' $(KDIR)/include/generated/utsrelease.h 2>/dev/null), \
	$(shell $(MAKE) -s -C $(KDIR) $(KMAKE_FLAGS) kernelrelease 2>/dev/null))))
# The newest NVIDIA driver source's nv-p2p.h.
NV_P2P_H ?= $(shell ls -d /usr/src/nvidia-*/nvidia/nv-p2p.h /usr/src/nvidia-*/nvidia-peermem/nv-p2p.h 2>/dev/null | sort -V | tail -n 1)
# MOFED's peer_mem.h, if it has the _ex client (5.4-3+, DOCA-OFED): older
# ones declare other layouts of the client struct (4.1 to 5.0: 152 bytes,
# no _ex), which the module chooses at load (peerdirect_support) instead.
PEER_MEM_H ?= $(firstword $(shell grep -ls 'struct peer_memory_client_ex' /dev/null $(wildcard \
	/usr/src/ofa_kernel/$(OFA_ARCH)/$(KREL)/include/rdma/peer_mem.h \
	/usr/src/ofa_kernel/$(KREL)/include/rdma/peer_mem.h \
	/usr/src/ofa_kernel/default/include/rdma/peer_mem.h)))
# Module.symvers of the GPU driver and the RDMA core; by default a stub
# naming the ABI headers' functions (scripts/abi-symvers.sh).
NVPM_EXTRA_SYMBOLS ?= $(CURDIR)/build/abi.symvers

RUST_SOURCES = $(filter-out src/abi_bindings.rs,$(wildcard src/*.rs src/core/src/*.rs))

# A clang-built kernel (CONFIG_CC_IS_CLANG) wants its modules built with
# clang and LLVM's tools too, of its clang's version: LLVM=-19 where clang-19
# is on PATH (Debian's and Ubuntu's versioned tools), else LLVM=1. This
# replaces no LLVM= or the plain LLVM=1 that DKMS passes for such kernels
# (dkms 3.x adds it when vmlinux's .comment or CONFIG_CC_IS_CLANG says clang;
# it fails where only versioned tools are installed); an LLVM= naming a
# version or directory, or CC= or LLVM= in KMAKE_FLAGS, is left as given.
KDIR_CLANG_MAJOR := $(if $(KDIR_CONFIG),$(shell sed -n 's/^CONFIG_CLANG_VERSION=\([1-9][0-9]*\)[0-9]\{4\}$$/\1/p' $(KDIR_CONFIG)))
ifeq ($(filter-out 1,$(LLVM))$(findstring LLVM=,$(KMAKE_FLAGS))$(findstring CC=,$(KMAKE_FLAGS)),)
KDIR_LLVM := $(if $(KDIR_CLANG_MAJOR),LLVM=$(if $(shell command -v clang-$(KDIR_CLANG_MAJOR)),-$(KDIR_CLANG_MAJOR),1))
endif

# How the module gets the kernel's Rust support (kbuild/rust-mode.sh):
# NVPM_RUST=auto (default) takes the kernel's own crates where they can be
# used and carries them in the module otherwise; kernel or carried force one.
# Carried mode builds the pinned release's sources: carried-src/ in a release
# tarball or -dkms package, build/carried-src/ in a git checkout (make fetches
# it: kbuild/carried-source.sh).
NVPM_RUST ?= auto
# NVPM_RUSTC: the rustc carried mode builds with (default: rustc on PATH).
NVPM_RUST_MODE := $(if $(KDIR),$(or $(shell RUSTC=$(or $(NVPM_RUSTC),rustc) kbuild/rust-mode.sh $(KDIR) $(NVPM_RUST)),error))
NVPM_CARRIED_SRC ?= $(firstword $(wildcard $(CURDIR)/carried-src) $(CURDIR)/build/carried-src)

# Carried mode's bindgen: kbuild/rust-toolchain.sh --bindgen says which
# (asked once: it runs each candidate's --version).
ifeq ($(origin NVPM_BINDGEN),undefined)
NVPM_BINDGEN := $(if $(filter carried,$(NVPM_RUST_MODE)),$(shell kbuild/rust-toolchain.sh --bindgen))
endif
KBUILD_ARGS = M=$(CURDIR) $(KMAKE_FLAGS) $(KDIR_LLVM) NVPM_RUST_MODE=$(NVPM_RUST_MODE) \
	$(if $(filter carried,$(NVPM_RUST_MODE)),NVPM_CARRIED_SRC=$(NVPM_CARRIED_SRC) NVPM_BINDGEN=$(NVPM_BINDGEN)) \
	NV_P2P_H=$(if $(NV_P2P_H),$(abspath $(NV_P2P_H))) \
	PEER_MEM_H=$(if $(PEER_MEM_H),$(abspath $(PEER_MEM_H)))
# Whether KDIR's kernel checks the CRCs of imported symbols.
MODVERSIONS := $(if $(KDIR_CONFIG),$(shell grep -qs '^CONFIG_MODVERSIONS=y' $(KDIR_CONFIG) && echo y))

.PHONY: all module vendor-headers carried-src carried-core sims tool provision check check-host check-arm64-dkms check-neighbours check-guest check-anchor check-kernels bench bench-profile lint fmt clean \
	install install-dkms install-utils check-packaging doctor install-doctor

# `make bench` (tests/bench/run.sh): its knobs cross into the trixie root.
BENCH_JSON ?= build/bench.json
BENCH_VARS = BENCH_COSTS BENCH_SIZES BENCH_LAYOUTS BENCH_REPS BENCH_LOOP_MS BENCH_MAX_COUNT \
	BENCH_MODE BENCH_CHECKS BENCH_ICOUNT BENCH_TIMEOUT BENCH_ANCHOR BENCH_CARRIED
BENCH_ENV = $(foreach v,$(BENCH_VARS),$(if $($(v)),$(v)="$($(v))"))
# `make check-anchor` (tests/anchor/run.sh): the same for its knobs.
# ANCHOR_GIT=DIR (a clone of NVIDIA's open-gpu-kernel-modules, ANCHOR_GIT_REV
# default HEAD) runs that release instead: tests/anchor/from-git.sh imports it
# into the cache on the host and names it as ANCHOR_VERSION.
ANCHOR_VARS = ANCHOR_GROUPS ANCHOR_VERSION ANCHOR_DEADLOCK_MS ANCHOR_PERSISTENT_API_SUPPORT
ANCHOR_ENV = $(foreach v,$(ANCHOR_VARS),$(if $($(v)),$(v)="$($(v))"))
# `make bench-profile` (tests/bench/profile/run.sh): the same for its knobs.
PROFILE_VARS = PROFILE_CLIENTS PROFILE_SIZE PROFILE_LAYOUT PROFILE_COUNT PROFILE_COST PROFILE_TIMEOUT
PROFILE_ENV = $(foreach v,$(PROFILE_VARS),$(if $($(v)),$(v)="$($(v))"))

# Without KDIR, vendor headers found on this host (or named) are not visible
# in the root: they cross as copies under build/vendor/ (make vendor-headers).
VENDOR_ARGS = $(if $(KDIR),,$(if $(NV_P2P_H),NV_P2P_H=/src/build/vendor/nv-p2p.h) \
	$(if $(PEER_MEM_H),PEER_MEM_H=/src/build/vendor/peer_mem.h))
# This Makefile again, inside the root (scripts/in-chroot.sh, debug-kernel.sh run).
# NVPM_RUST crosses too (the root's make starts with a clean environment).
IN_ROOT_MAKE = make --no-print-directory KDIR="$$KDIR" KMAKE_FLAGS="$$KMAKE_FLAGS" $(VENDOR_ARGS) \
	$(if $(filter-out auto,$(NVPM_RUST)),NVPM_RUST=$(NVPM_RUST))

all: module

# NVPM_KARCH=arm64: Debian's 7.3 kernel of that architecture instead
# (cross-built, booted with qemu-system-aarch64), its env file in the cache;
# NVPM_KFLAVOUR=arm64-16k: Debian's flavour of it with 16 KiB pages.
NVPM_KARCH ?=
NVPM_KFLAVOUR ?= $(NVPM_KARCH)
ifneq ($(NVPM_KARCH),)
NVPM_KERNEL_ENV ?= kernel-7.3-$(NVPM_KFLAVOUR).env
export NVPM_KERNEL_ENV
endif

ifeq ($(KDIR),)
# No kernel tree given: build inside the provisioned trixie root, for Debian's 7.3 kernel.
provision:
	@$(if $(NVPM_KARCH),KARCH=$(NVPM_KARCH) KFLAVOUR=$(NVPM_KFLAVOUR) )scripts/provision.sh

vendor-headers:
	@rm -rf build/vendor && mkdir -p build/vendor
	$(if $(NV_P2P_H),@echo "nvidia_peermem: vendor nv-p2p.h $(NV_P2P_H)" && cp "$(NV_P2P_H)" build/vendor/nv-p2p.h)
	$(if $(PEER_MEM_H),@echo "nvidia_peermem: vendor peer_mem.h $(PEER_MEM_H)" && cp "$(PEER_MEM_H)" build/vendor/peer_mem.h)

module: provision vendor-headers carried-src
	@scripts/in-chroot.sh sh -c '$(IN_ROOT_MAKE) module'

# The pinned sources carried mode builds, fetched once into the cache.
carried-src:
	@kbuild/carried-source.sh build/carried-src

lint: provision vendor-headers
	@scripts/in-chroot.sh sh -c '$(IN_ROOT_MAKE) lint'

# The guest tests' tool (tests/tool) and the doctor (src/doctor), built on the
# host: static, no library dependencies; tests/guest/run.sh puts both in the initramfs.
# For the provisioned kernel's architecture (scripts/build-tool.sh).
tool:
	@scripts/build-tool.sh

check-guest: module tool
	@scripts/in-chroot.sh sh -c '$(IN_ROOT_MAKE) check-guest'

# NVIDIA's nvidia-peermem through the guest scenarios (tests/anchor/run.sh):
# fetched from Debian into the cache and built in the root, not this module.
check-anchor: provision tool
	$(if $(ANCHOR_GIT),@mkdir -p build && tests/anchor/from-git.sh "$(ANCHOR_GIT)" $(ANCHOR_GIT_REV) >build/anchor-git.key)
	@scripts/in-chroot.sh sh -c '$(IN_ROOT_MAKE) $(ANCHOR_ENV) $(if $(ANCHOR_GIT),ANCHOR_VERSION="$$(cat build/anchor-git.key)") check-anchor'

bench: module tool
	@scripts/in-chroot.sh sh -c '$(IN_ROOT_MAKE) $(BENCH_ENV) bench'
	@[ "$(abspath $(BENCH_JSON))" = "$(CURDIR)/build/bench.json" ] || cp build/bench.json "$(BENCH_JSON)"
	@echo "bench: JSON in $(BENCH_JSON)"

# Where a registration's guest instructions go, per function (tests/bench/README.md).
bench-profile: module tool
	@scripts/in-chroot.sh sh -c '$(IN_ROOT_MAKE) $(PROFILE_ENV) bench-profile'

# The stress suite's long run, outside make check (tests/stress/README.md).
stress-long: module tool
	@scripts/in-chroot.sh sh -c 'STRESS_LONG_ENV="$(STRESS_LONG_ENV)" STRESS_SEED="$(STRESS_SEED)" STRESS_CONFIGS="$(STRESS_CONFIGS)" \
		$(IN_ROOT_MAKE) stress-long'

fmt: provision
	@scripts/in-chroot.sh sh -c 'rustfmt --edition 2021 $(RUST_SOURCES)'
else
module: build/abi.symvers
	@test "$(NVPM_RUST_MODE)" != error || { echo "nvidia_peermem: NVPM_RUST=$(NVPM_RUST) cannot build for $(KDIR) (see above)" >&2; exit 1; }
	@echo "nvidia_peermem: Rust support: $(NVPM_RUST_MODE)$(if $(filter carried,$(NVPM_RUST_MODE)), (the kernel's crates of $(shell . kbuild/carried.pin; echo $$CARRIED_LINUX), built into the module))"
	@test "$(NVPM_RUST_MODE)" != carried || kbuild/carried-source.sh --verify $(NVPM_CARRIED_SRC) || { \
		echo "nvidia_peermem: carried mode needs the pinned Rust sources in $(NVPM_CARRIED_SRC):" \
			"run kbuild/carried-source.sh $(NVPM_CARRIED_SRC) (a git checkout) or use the release tarball" >&2; \
		if grep -qs '^CONFIG_RUST=y' $(KDIR_CONFIG); then echo "nvidia_peermem: or, for kernel mode," \
			"give $(KDIR) the kernel's compiled crates: scripts/rust-headers.sh $(KREL) $(KDIR)" >&2; fi; exit 1; }
	@test "$(NVPM_RUST_MODE)" != carried || RUSTC=$(or $(NVPM_RUSTC),rustc) BINDGEN=$(NVPM_BINDGEN) kbuild/rust-toolchain.sh || exit 1
	@echo "nvidia_peermem: nv-p2p.h from $(or $(NV_P2P_H),src/ffi), peer_mem.h from $(or $(PEER_MEM_H),src/ffi)"
	$(if $(KDIR_LLVM),@echo "nvidia_peermem: $(KDIR) was built with clang $(KDIR_CLANG_MAJOR): $(KDIR_LLVM)")
	@# A CONFIG_MODVERSIONS kernel refuses the stub's CRCs of 0 ("disagrees
	@# about version of symbol"): the CRCs of the driver and RDMA core
	@# modules installed for KREL (scripts/find-symvers.sh), or the tables
	@# given, checked.
	@set -e; symbols="$(NVPM_EXTRA_SYMBOLS)"; \
	if [ "$(MODVERSIONS)" = y ]; then \
		if [ "$$symbols" = "$(CURDIR)/build/abi.symvers" ]; then \
			symbols=$(CURDIR)/build/exporters.symvers; scripts/find-symvers.sh "$(KREL)" "$$symbols"; \
		else scripts/find-symvers.sh --check "$(KREL)" $$symbols; \
			echo "nvidia_peermem: CONFIG_MODVERSIONS=y: CRCs from $$symbols"; fi; \
	fi; \
	$(MAKE) -C $(KDIR) $(KBUILD_ARGS) NVPM_EXTRA_SYMBOLS="$$symbols" modules

build/abi.symvers: scripts/abi-symvers.sh src/ffi/nv-p2p.h src/ffi/peer_mem.h
	@mkdir -p build && scripts/abi-symvers.sh src/ffi >$@

# NVIDIA's nvidia-peermem, built by tests/anchor/build.sh, in the guest scenarios.
check-anchor: sims
	$(ANCHOR_ENV) tests/anchor/run.sh

# carried mode's core and compiler_builtins alone, with their rustc flags
# and target.json for this kernel (tests/kocheck/negative.sh compiles its
# probe with them).
carried-core:
	$(MAKE) -C $(KDIR) $(KBUILD_ARGS) build/carried/compiler_builtins.o

# The simulated GPU driver and MOFED core (test infrastructure, tests/sim).
sims:
	@if [ -f tests/sim/Kbuild ]; then $(MAKE) -C $(KDIR) M=$(CURDIR)/tests/sim $(KMAKE_FLAGS) $(KDIR_LLVM) modules; fi

lint: build/abi.symvers
	@mkdir -p build
	$(MAKE) -C $(KDIR) $(KBUILD_ARGS) NVPM_EXTRA_SYMBOLS="$(NVPM_EXTRA_SYMBOLS)" CLIPPY=1 modules 2>&1 | tee build/clippy.log
	@! grep -E '^(warning|error)' build/clippy.log || { echo "lint: clippy reported the above"; exit 1; }
	rustfmt --check --edition 2021 $(RUST_SOURCES)
	$(MAKE) -C $(KDIR) $(KBUILD_ARGS) NVPM_EXTRA_SYMBOLS="$(NVPM_EXTRA_SYMBOLS)" modules

# On a CONFIG_MODVERSIONS kernel the module carries the simulators' CRCs:
# the guest loads them as the driver and the RDMA core.
check-guest: sims
	@$(MAKE) --no-print-directory module $(if $(MODVERSIONS),NVPM_EXTRA_SYMBOLS="$(CURDIR)/tests/sim/Module.symvers")
	GUEST_EXTRA_KO="$(wildcard tests/sim/*.ko)" tests/guest/run.sh

bench: module sims
	$(BENCH_ENV) tests/bench/run.sh

bench-profile: module sims
	$(PROFILE_ENV) tests/bench/profile/run.sh

stress-long: module sims
	GUEST_EXTRA_KO="$(wildcard tests/sim/*.ko)" STRESS_LONG_ENV="$(STRESS_LONG_ENV)" tests/stress/long.sh
endif

# Debug guest kernel (KASAN, lockdep, kmemleak, fault injection), cached; see
# tests/debug/README.md.
.PHONY: debug-kernel check-debug
debug-kernel:
	@scripts/provision.sh
	@scripts/debug-kernel.sh build

# The module and simulators built against the debug kernel, then the guest tests booted on it
# (the host-built tests/tool too, as check-guest needs it).
check-debug: debug-kernel $(if $(KDIR),,tool vendor-headers) $(if $(filter carried,$(NVPM_RUST)),carried-src)
	@scripts/debug-kernel.sh run sh -c '$(IN_ROOT_MAKE) NVPM_RUST=$(NVPM_RUST) check-guest'

# make check's "debug" suite: the load test and the stress suite (01, 51-55) on
# the debug kernel, built first if not cached, at a scale that fits CI
# (tests/stress/README.md); make check-guest runs them at full scale
# on Debian's kernel.
# Three configurations (every core generation, with invalidation): 2,000
# concurrent operations each, 500 random ones; the windows in the modern
# core; the load sweep fails every 16th allocation inside kmem_cache_create,
# every one elsewhere (the scale halved for the cold budget: a cold make
# check is bound by CPU time). 50 (bad input) runs on Debian's kernel only.
# One guest, run.sh's default: two side by side took longer (741 s against
# about 680).
DEBUG_STRESS_ENV ?= STRESS_CONFIGS=modern-revocable,mid-revocable,legacy-revocable \
	STRESS_CONC_OPS=2000 STRESS_RANDOM_OPS=500 STRESS_FAILSLAB_STRIDE=16 STRESS_WINDOW_MODES=modern
.PHONY: check-debug-stress
check-debug-stress:
	@GUEST_SCENARIOS='01-* 5[1-5]-*' GUEST_ENV="$(DEBUG_STRESS_ENV)" \
		$(MAKE) --no-print-directory check-debug

# make check's "anchor-debug" suite: NVIDIA's nvidia-peermem on the debug
# kernel, where the GPU simulator frees revoked tables for real and KASAN
# reports the anchor's read of one (bug freed-table); by default only the
# scenario that shows it (group stale-read: 43). Needs no build of this module.
ANCHOR_DEBUG_GROUPS ?= stale-read
.PHONY: check-anchor-debug
check-anchor-debug: debug-kernel $(if $(KDIR),,tool)
	@scripts/debug-kernel.sh run sh -c '$(IN_ROOT_MAKE) $(ANCHOR_ENV) \
		ANCHOR_GROUPS="$(ANCHOR_DEBUG_GROUPS)" ANCHOR_OUT=build/anchor-debug check-anchor'

# The stress suite's scale in make stress-long: one guest per configuration.
STRESS_LONG_ENV ?= STRESS_CONC_OPS=1000000 STRESS_RANDOM_OPS=150000 STRESS_RANDOM_CHECK=2000
.PHONY: stress-long

check-host:
	@tests/host/run.sh

# DKMS on an arm64 host, natively: Debian's arm64 root under qemu-user
# (tests/arm64-dkms/run.sh; not in make check: cold about 20 minutes).
check-arm64-dkms:
	@tests/arm64-dkms/run.sh

# The neighbours' real packages in the order an admin installs them
# (tests/neighbours/run.sh; not in make check: cold about 13 minutes).
check-neighbours: tool
	@tests/neighbours/run.sh

# make check's "kernels" suite: Debian's 7.2 image (NVPM_OTHER_KSERIES), built,
# loaded, client scenarios (tests/kernels/run.sh).
check-kernels: tool
	@tests/kernels/run.sh

check:
	@tests/run-all.sh

clean:
	@if [ -n "$(KDIR)" ]; then $(MAKE) -C $(KDIR) $(KBUILD_ARGS) clean && \
		$(MAKE) -C $(KDIR) M=$(CURDIR)/tests/sim $(KMAKE_FLAGS) $(KDIR_LLVM) clean; \
	else scripts/in-chroot.sh sh -c '$(IN_ROOT_MAKE) clean'; fi
	rm -rf target

# --- installation (packaging/, README.md "Install") -------------------------
# install: the built module; install-dkms: the DKMS source tree and its
# helpers; install-utils: the service, its settings and the modprobe rules;
# doctor, install-doctor: nvidia-peermem-doctor (src/doctor), built with the
# cargo on PATH from Cargo.lock: --locked here, where cargo may fetch its
# crates; the deb and rpm builds pass DOCTOR_CARGO_FLAGS=--frozen (offline,
# from the vendor/ that build_module.sh puts in the source package).
VERSION_NUM := $(shell cat VERSION)
DKMS_NAME := nvidia-peer-memory
MODULE_DESTDIR ?= /lib/modules/$(KREL)/extra
LIBDIR_NVPM ?= /usr/lib/nvidia-peer-memory
SYSTEMD_UNIT_DIR ?= /usr/lib/systemd/system
MODPROBE_D_DIR ?= /usr/lib/modprobe.d
DKMS_SOURCES = Makefile Kbuild VERSION dkms.conf scripts/abi-symvers.sh scripts/find-symvers.sh scripts/rust-headers.sh \
	$(shell find kbuild -type f | LC_ALL=C sort) \
	$(shell find src -path src/doctor -prune -o -type f \( -name '*.rs' -o -name '*.c' -o -name '*.h' \
		-o -name Cargo.toml \) ! -name abi_bindings.rs -print | LC_ALL=C sort)

install:
	@test -f nvidia_peermem.ko || { echo "build the module first (make KDIR=...)" >&2; exit 1; }
	install -D -m 0644 nvidia_peermem.ko $(DESTDIR)$(MODULE_DESTDIR)/nvidia_peermem.ko
	@if [ -z "$(DESTDIR)" ]; then depmod -a $(KREL); fi

# The DKMS tree carries the pinned Rust sources of carried mode (carried-src/,
# from the release tarball, or build/carried-src/ that make carried-src fetched).
install-dkms:
	@kbuild/carried-source.sh --verify $(NVPM_CARRIED_SRC) || { echo "install-dkms: no pinned Rust sources in" \
		"$(NVPM_CARRIED_SRC) (carried mode needs them): make carried-src, or build from the release tarball" >&2; exit 1; }
	@set -e; for f in $(DKMS_SOURCES); do \
		install -D -m 0644 $$f $(DESTDIR)/usr/src/$(DKMS_NAME)-$(VERSION_NUM)/$$f; done
	@set -e; cd $(NVPM_CARRIED_SRC) && find . -type f | LC_ALL=C sort | while IFS= read -r f; do \
		install -D -m 0644 "$$f" "$(DESTDIR)/usr/src/$(DKMS_NAME)-$(VERSION_NUM)/carried-src/$$f"; done
	chmod 0755 $(DESTDIR)/usr/src/$(DKMS_NAME)-$(VERSION_NUM)/scripts/*.sh $(DESTDIR)/usr/src/$(DKMS_NAME)-$(VERSION_NUM)/kbuild/*.sh \
		$(DESTDIR)/usr/src/$(DKMS_NAME)-$(VERSION_NUM)/kbuild/carried/*.sh \
		$(DESTDIR)/usr/src/$(DKMS_NAME)-$(VERSION_NUM)/carried-src/scripts/*.sh
	install -D -m 0755 scripts/rust-headers.sh $(DESTDIR)$(LIBDIR_NVPM)/rust-headers
	install -D -m 0755 packaging/dkms-ready.sh $(DESTDIR)$(LIBDIR_NVPM)/dkms-ready
	install -D -m 0755 packaging/dkms-rebuild.sh $(DESTDIR)$(LIBDIR_NVPM)/dkms-rebuild
	install -D -m 0644 packaging/dkms-post-transaction.conf $(DESTDIR)/etc/dkms/framework.conf.d/nvidia-peer-memory.conf
	install -D -m 0755 packaging/kernel-postrm.sh $(DESTDIR)/etc/kernel/postrm.d/nvidia-peer-memory

install-utils:
	install -D -m 0755 packaging/nv_peer_mem.sh $(DESTDIR)$(LIBDIR_NVPM)/nv_peer_mem
	install -D -m 0755 packaging/nv_peer_mem.init $(DESTDIR)/etc/init.d/nv_peer_mem
	install -D -m 0644 packaging/nv_peer_mem.conf $(DESTDIR)/etc/infiniband/nv_peer_mem.conf
	install -D -m 0644 packaging/nv_peer_mem.service $(DESTDIR)$(SYSTEMD_UNIT_DIR)/nv_peer_mem.service
	install -D -m 0644 packaging/modprobe.conf $(DESTDIR)$(MODPROBE_D_DIR)/00-nvidia-peer-memory.conf
	install -D -m 0644 packaging/modules-load.conf $(DESTDIR)/etc/modules-load.d/nvidia-peermem.conf

# DOCTOR_TARGET: a Rust target triple to cross-build for (the packages'
# cross builds: debian/rules from DEB_HOST_RUST_TYPE, the spec from
# rpmbuild --target), linked with DOCTOR_LINKER (that target's C compiler,
# e.g. aarch64-linux-gnu-gcc); empty: the build machine's own.
DOCTOR_TARGET ?=
DOCTOR_LINKER ?=
DOCTOR_BIN = target/$(if $(DOCTOR_TARGET),$(DOCTOR_TARGET)/)release/nvidia-peermem-doctor
BINDIR ?= /usr/bin
MAN1DIR ?= /usr/share/man/man1

DOCTOR_CARGO_FLAGS ?= --locked

# Paths of the build tree (the vendored crates' panic locations) are
# remapped, so the binary does not name where it was built.
DOCTOR_CROSS_FLAGS = $(if $(DOCTOR_TARGET),--target $(DOCTOR_TARGET)) \
	$(if $(DOCTOR_LINKER),--config 'target.$(DOCTOR_TARGET).linker="$(DOCTOR_LINKER)"')
doctor:
	RUSTFLAGS="$$RUSTFLAGS --remap-path-prefix=$(CURDIR)=." cargo build --release $(DOCTOR_CARGO_FLAGS) -p nvidia-peermem-doctor $(strip $(DOCTOR_CROSS_FLAGS))

install-doctor:
	@test -x $(DOCTOR_BIN) || { echo "build the doctor first (make doctor)" >&2; exit 1; }
	install -D -m 0755 $(DOCTOR_BIN) $(DESTDIR)$(BINDIR)/nvidia-peermem-doctor
	install -D -m 0644 src/doctor/nvidia-peermem-doctor.1 $(DESTDIR)$(MAN1DIR)/nvidia-peermem-doctor.1

# The DKMS builds boot their kernels with the tests' tools (the debug
# kernel's part runs when that kernel is built: make debug-kernel).
check-packaging: $(if $(KDIR),,tool)
	@tests/packaging/run.sh
