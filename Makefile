# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Entry points (README.md):
#   make            provision what is missing, build nvidia_peermem.ko for Debian's 7.3 kernel
#   make check      host tests, then guest tests in QEMU; ends with "N passed, N failed"
#   make lint       the build with CLIPPY=1, rustfmt --check, shellcheck
#   make KDIR=...   build against any Rust-enabled kernel build tree, provisioning nothing

KDIR ?=
KMAKE_FLAGS ?=

# Vendor ABI headers, used when present; otherwise src/ffi/ has the project's own.
OFA_ARCH := $(shell uname -m)
KREL ?= $(if $(KDIR),$(shell $(MAKE) -s -C $(KDIR) $(KMAKE_FLAGS) kernelrelease 2>/dev/null))
NV_P2P_H ?= $(firstword $(wildcard /usr/src/nvidia-*/nvidia/nv-p2p.h /usr/src/nvidia-*/nvidia-peermem/nv-p2p.h))
PEER_MEM_H ?= $(firstword $(wildcard \
	/usr/src/ofa_kernel/$(OFA_ARCH)/$(KREL)/include/rdma/peer_mem.h \
	/usr/src/ofa_kernel/$(KREL)/include/rdma/peer_mem.h \
	/usr/src/ofa_kernel/default/include/rdma/peer_mem.h))
# Module.symvers of the GPU driver and the RDMA core; by default a stub
# naming the ABI headers' functions (scripts/abi-symvers.sh).
NVPM_EXTRA_SYMBOLS ?= $(CURDIR)/build/abi.symvers

RUST_SOURCES = $(filter-out src/abi_bindings.rs,$(wildcard src/*.rs src/core/src/*.rs))

KBUILD_ARGS = M=$(CURDIR) $(KMAKE_FLAGS) \
	NV_P2P_INC=$(if $(NV_P2P_H),$(dir $(NV_P2P_H))) \
	PEER_MEM_INC=$(if $(PEER_MEM_H),$(dir $(PEER_MEM_H))) \
	NVPM_EXTRA_SYMBOLS="$(NVPM_EXTRA_SYMBOLS)"

.PHONY: all module sims tool provision check check-host check-guest lint fmt clean

all: module

ifeq ($(KDIR),)
# No kernel tree given: build inside the provisioned trixie root, for Debian's 7.3 kernel.
provision:
	@scripts/provision.sh

module: provision
	@scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$$KDIR" KMAKE_FLAGS="$$KMAKE_FLAGS" module'

lint: provision
	@scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$$KDIR" KMAKE_FLAGS="$$KMAKE_FLAGS" lint'

# The guest tests' tool (tests/tool), built on the host: static, no dependencies.
tool:
	RUSTFLAGS='-C target-feature=+crt-static' cargo build --release -p nvpm-tool --target x86_64-unknown-linux-gnu

check-guest: module tool
	@scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$$KDIR" KMAKE_FLAGS="$$KMAKE_FLAGS" check-guest'

# The stress suite's long run, outside make check (tests/README.md, "Stress suite").
stress-long: module tool
	@scripts/in-chroot.sh sh -c 'STRESS_LONG_ENV="$(STRESS_LONG_ENV)" STRESS_SEED="$(STRESS_SEED)" STRESS_CONFIGS="$(STRESS_CONFIGS)" \
		make --no-print-directory KDIR="$$KDIR" KMAKE_FLAGS="$$KMAKE_FLAGS" stress-long'

fmt: provision
	@scripts/in-chroot.sh sh -c 'rustfmt --edition 2021 $(RUST_SOURCES)'
else
module: build/abi.symvers
	$(MAKE) -C $(KDIR) $(KBUILD_ARGS) modules

build/abi.symvers: scripts/abi-symvers.sh src/ffi/nv-p2p.h src/ffi/peer_mem.h
	@mkdir -p build && scripts/abi-symvers.sh src/ffi >$@

# The simulated GPU driver and MOFED core (test infrastructure, tests/sim).
sims:
	@if [ -f tests/sim/Kbuild ]; then $(MAKE) -C $(KDIR) M=$(CURDIR)/tests/sim $(KMAKE_FLAGS) modules; fi

lint: build/abi.symvers
	@mkdir -p build
	$(MAKE) -C $(KDIR) $(KBUILD_ARGS) CLIPPY=1 modules 2>&1 | tee build/clippy.log
	@! grep -E '^(warning|error)' build/clippy.log || { echo "lint: clippy reported the above"; exit 1; }
	rustfmt --check --edition 2021 $(RUST_SOURCES)
	$(MAKE) -C $(KDIR) $(KBUILD_ARGS) modules

check-guest: module sims
	GUEST_EXTRA_KO="$(wildcard tests/sim/*.ko)" tests/guest/run.sh

stress-long: module sims
	GUEST_EXTRA_KO="$(wildcard tests/sim/*.ko)" STRESS_LONG_ENV="$(STRESS_LONG_ENV)" tests/stress/long.sh
endif

# The stress suite's scale in make stress-long: one guest per configuration.
STRESS_LONG_ENV ?= STRESS_CONC_OPS=1000000 STRESS_RANDOM_OPS=150000 STRESS_RANDOM_CHECK=2000
.PHONY: stress-long

check-host:
	@tests/host/run.sh

check:
	@tests/run-all.sh

clean:
	@if [ -n "$(KDIR)" ]; then $(MAKE) -C $(KDIR) $(KBUILD_ARGS) clean && \
		$(MAKE) -C $(KDIR) M=$(CURDIR)/tests/sim $(KMAKE_FLAGS) clean; \
	else scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$$KDIR" KMAKE_FLAGS="$$KMAKE_FLAGS" clean'; fi
	rm -rf target
