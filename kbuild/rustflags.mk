# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# rustc's code-generation flags for this kernel, derived from its .config the
# way the newest kernel's own Makefiles derive them for Rust (7.3: the top
# Makefile's KBUILD_RUSTFLAGS, arch/x86/Makefile, arch/arm64/Makefile,
# scripts/Makefile.kasan, scripts/Makefile.debug), so that Rust code compiled
# here for an older kernel (which may not know these options for Rust, or has
# no Rust at all) obeys what the kernel's C code obeys: the code model, no red
# zone, soft float, retpolines and return thunks, IBT's endbr64, the function
# padding that call-depth tracking patches, frame pointers, kCFI, KASAN; on
# arm64 pointer authentication, BTI and the shadow call stack.
#
# Not covered for Rust by any kernel (and so not here): the stack protector
# (rustc has no kernel-style one) and -mindirect-branch-cs-prefix. Not here
# yet: arm64's KASAN_SW_TAGS (no Debian kernel has it).
# x86's SLS hardening and retpoline target features come with target.json
# (the pinned release's scripts/generate_rust_target.rs); arm64 uses rustc's
# built-in target, as the kernel does.

NVPM_RUSTC_VERSION := $(shell $(NVPM_RUSTC) --version 2>/dev/null | \
	sed -n 's/^rustc \([0-9]*\)\.\([0-9]*\)\.\([0-9]*\).*/\1 \2 \3/p' | \
	awk '{ printf "%d", $$1 * 100000 + $$2 * 100 + $$3 }')
# $(call nvpm_rustc_min,108700): y when the rustc is at least 1.87.0.
nvpm_rustc_min = $(shell [ "0$(NVPM_RUSTC_VERSION)" -ge $(1) ] && echo y)

NVPM_KCONFIG := $(firstword $(wildcard $(objtree)/include/config/auto.conf) $(objtree)/.config)

nvpm_rf := -Cpanic=abort -Cembed-bitcode=n -Clto=n -Cforce-unwind-tables=n \
	-Ccodegen-units=1 -Csymbol-mangling-version=v0 -Crelocation-model=static \
	-Zfunction-sections=n

ifeq ($(CONFIG_X86_64)$(CONFIG_ARM64),)
$(error nvidia_peermem: carried mode knows the Rust flags of x86_64 and arm64 kernels only)
endif

ifdef CONFIG_X86_64
nvpm_rf += --target=$(nvpm_cr_abs)/target.json \
	-Ctarget-feature=-sse,-sse2,-sse3,-ssse3,-sse4.1,-sse4.2,-avx,-avx2 \
	-Cno-redzone=y -Ccode-model=kernel
ifdef CONFIG_X86_NATIVE_CPU
nvpm_rf += -Ctarget-cpu=native
else
nvpm_rf += -Ctarget-cpu=x86-64 -Ztune-cpu=generic
endif
ifdef CONFIG_X86_KERNEL_IBT
nvpm_rf += -Zcf-protection=branch $(if $(call nvpm_rustc_min,109300),-Cjump-tables=n,-Zno-jump-tables)
endif
# 6.1 to 6.8 name it CONFIG_RETHUNK.
ifneq ($(CONFIG_MITIGATION_RETHUNK)$(CONFIG_RETHUNK),)
nvpm_rf += -Zfunction-return=thunk-extern
endif
ifdef CONFIG_CALL_PADDING
nvpm_rf += -Zpatchable-function-entry=$(CONFIG_FUNCTION_PADDING_BYTES),$(CONFIG_FUNCTION_PADDING_BYTES)
endif
endif

# arm64, as the pinned release's arch/arm64/Makefile and top Makefile set
# it: rustc's own soft-float target (no NEON or FP registers: the kernel's
# C code is -mgeneral-regs-only; rustc before 1.85, which the pin's minimum
# excludes, had only the hard-float one with NEON turned off), unwind tables
# only where the kernel keeps them (dynamic SCS patches from them), return
# addresses signed (PAC) and, with BTI, `bti` landing pads at indirect-branch
# targets, x18 reserved for the shadow call stack. The code model is rustc's
# default, the small one the kernel's C modules use.
ifdef CONFIG_ARM64
ifeq ($(call nvpm_rustc_min,108500),y)
nvpm_rf += --target=aarch64-unknown-none-softfloat
else
nvpm_rf += --target=aarch64-unknown-none -Ctarget-feature=-neon
endif
ifdef CONFIG_UNWIND_TABLES
nvpm_rf += -Cforce-unwind-tables=y -Zuse-sync-unwind=n \
	$(if $(call nvpm_rustc_min,109800),,-Zllvm_module_flag=uwtable:u32:2:max)
endif
ifdef CONFIG_ARM64_BTI_KERNEL
nvpm_rf += -Zbranch-protection=bti,pac-ret
else ifdef CONFIG_ARM64_PTR_AUTH_KERNEL
nvpm_rf += -Zbranch-protection=pac-ret
endif
ifdef CONFIG_SHADOW_CALL_STACK
nvpm_rf += -Zfixed-x18
ifndef CONFIG_DYNAMIC_SCS
nvpm_rf += -Zsanitizer=shadow-call-stack
endif
endif
endif

ifdef CONFIG_CC_OPTIMIZE_FOR_SIZE
nvpm_rf += -Copt-level=s
else
nvpm_rf += -Copt-level=2
endif
nvpm_rf += -Cdebug-assertions=n -Coverflow-checks=n

ifdef CONFIG_FRAME_POINTER
nvpm_rf += -Cforce-frame-pointers=y \
	$(if $(call nvpm_rustc_min,109800),,-Zllvm_module_flag=frame-pointer:u32:2:max)
endif

# Before 6.17 it is CONFIG_CFI_CLANG.
ifneq ($(CONFIG_CFI)$(CONFIG_CFI_CLANG),)
nvpm_rf += -Zsanitizer=kcfi -Zsanitizer-cfi-normalize-integers -Zmerge-functions=disabled
endif

# KASAN (generic, outline or inline), as scripts/Makefile.kasan sets it.
ifdef CONFIG_KASAN_GENERIC
nvpm_rf += -Zsanitizer=kernel-address -Zsanitizer-recover=kernel-address \
	-Cllvm-args=-asan-mapping-offset=$(CONFIG_KASAN_SHADOW_OFFSET) \
	-Cllvm-args=-asan-globals=1 \
	-Cllvm-args=-asan-instrumentation-with-call-threshold=$(if $(CONFIG_KASAN_INLINE),10000,0) \
	$(if $(CONFIG_KASAN_STACK),-Cllvm-args=-asan-stack=1,-Cllvm-args=-asan-stack=0) \
	-Cllvm-args=-asan-kernel-mem-intrinsic-prefix=1
endif

ifdef CONFIG_DEBUG_INFO
nvpm_rf += -Cdebuginfo=$(if $(CONFIG_DEBUG_INFO_REDUCED),1,2) \
	$(if $(CONFIG_DEBUG_INFO_DWARF5),-Zdwarf-version=5,-Zdwarf-version=4)
endif

NVPM_CARRIED_RUSTFLAGS := $(nvpm_rf)

# bindgen's --rust-target for the carried crates: what the pinned release's
# rust/Makefile passes.
NVPM_BINDGEN_RUST_TARGET := $(or $(shell sed -n 's/.*--rust-target \([0-9][0-9.]*\).*/\1/p' \
	$(NVPM_CARRIED_SRC)/rust/Makefile 2>/dev/null | head -n 1),1.78)
