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
NVPM_EXTRA_SYMBOLS ?=

KBUILD_ARGS = M=$(CURDIR) $(KMAKE_FLAGS) \
	NV_P2P_INC=$(if $(NV_P2P_H),$(dir $(NV_P2P_H))) \
	PEER_MEM_INC=$(if $(PEER_MEM_H),$(dir $(PEER_MEM_H))) \
	NVPM_EXTRA_SYMBOLS="$(NVPM_EXTRA_SYMBOLS)"

.PHONY: all module provision check check-host check-guest lint clean

all: module

ifeq ($(KDIR),)
# No kernel tree given: build inside the provisioned trixie root, for Debian's 7.3 kernel.
provision:
	@scripts/provision.sh

module: provision
	@scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$$KDIR" KMAKE_FLAGS="$$KMAKE_FLAGS" module'

lint: provision
	@scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$$KDIR" KMAKE_FLAGS="$$KMAKE_FLAGS" lint'

check-guest: module
	@scripts/in-chroot.sh tests/guest/run.sh
else
module:
	$(MAKE) -C $(KDIR) $(KBUILD_ARGS) modules

lint:
	$(MAKE) -C $(KDIR) $(KBUILD_ARGS) CLIPPY=1 modules
	rustfmt --check --edition 2021 src/*.rs src/core/src/*.rs
	$(MAKE) -C $(KDIR) $(KBUILD_ARGS) modules

check-guest: module
	tests/guest/run.sh
endif

check-host:
	@tests/host/run.sh

check:
	@tests/run-all.sh

clean:
	@if [ -n "$(KDIR)" ]; then $(MAKE) -C $(KDIR) $(KBUILD_ARGS) clean; \
	else scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$$KDIR" KMAKE_FLAGS="$$KMAKE_FLAGS" clean'; fi
	rm -rf target
