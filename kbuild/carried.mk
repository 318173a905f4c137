# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Carried mode: the kernel's Rust support compiled into this module, for a
# kernel that has none of its own (CONFIG_RUST unset, or its crates unusable).
# Included by Kbuild when NVPM_RUST_MODE is "carried".
#
# The crates (core from rustc's rust-src; compiler_builtins, ffi, build_error,
# pin_init, zerocopy, bindings, kernel from one pinned kernel release,
# $(NVPM_CARRIED_SRC), see kbuild/carried-source.sh) are built here for this
# kernel: bindgen reads this kernel's own headers and .config, the C helpers
# are compiled by Kbuild against the same headers, and every target crate gets
# the code-generation flags of kbuild/rustflags.mk. Their objects are linked
# into nvidia_peermem.ko; their Rust symbols stay local to it (no new exports),
# so only C symbols cross the module boundary.
#
# The pinned release's own rules (rust/Makefile: the crates' cfgs, editions,
# the intrinsics core must not define) are mirrored below; rustc unstable
# options need RUSTC_BOOTSTRAP=1, as a kernel's own Rust build has them.

nvpm_cr := $(obj)/build/carried
nvpm_cr_abs := $(abspath $(nvpm_cr))
nvpm_cr_src := $(NVPM_CARRIED_SRC)/rust
NVPM_RUSTC ?= rustc
NVPM_BINDGEN ?= bindgen
NVPM_HOSTCC ?= $(or $(HOSTCC),cc)
nvpm_rust_lib_src := $(shell $(NVPM_RUSTC) --print sysroot 2>/dev/null)/lib/rustlib/src/rust/library

include $(src)/kbuild/rustflags.mk

# The kernel's configuration as rustc cfgs (what include/generated/rustc_cfg
# holds in a kernel with Rust): CONFIG_X=y -> --cfg=CONFIG_X and
# --cfg=CONFIG_X="y"; other values -> --cfg=CONFIG_X="value". CONFIG_RUST is
# set for the carried crates (they refuse to build without it). Options that
# only switch on Rust code for subsystems this module does not use (block,
# PCI, networking, DRM, ...) stay off: that code is not carried.
nvpm_cr_subsystems := BLOCK PCI NET DRM USB I2C AUXILIARY_BUS CONFIGFS_FS CPU_FREQ PM_OPP \
	COMMON_CLK OF ACPI KUNIT SOC_BUS REGULATOR PWM SERIAL_DEV_BUS FW_LOADER GPU_BUDDY
# What the kernel's configuration says of its own rustc (CONFIG_RUSTC_*) is
# replaced by what the pinned release's init/Kconfig derives from the rustc
# that builds the module: RUSTC_HAS_X is RUSTC_VERSION >= its version there.
nvpm_cr_rustc_has := SPAN_FILE:108800 UNNECESSARY_TRANSMUTES:108800 FILE_WITH_NUL:108900 \
	FILE_AS_C_STR:109100 SUSPICIOUS_RUNTIME_SYMBOL_DEFINITIONS:109800
quiet_cmd_nvpm_rustc_cfg = GEN     $@
      cmd_nvpm_rustc_cfg = mkdir -p $(@D); { echo --cfg=CONFIG_RUST; \
	echo '--cfg=CONFIG_RUSTC_VERSION="$(NVPM_RUSTC_VERSION)"'; \
	$(foreach h,$(nvpm_cr_rustc_has),$(if $(call nvpm_rustc_min,$(lastword $(subst :, ,$(h)))), \
		echo '--cfg=CONFIG_RUSTC_HAS_$(firstword $(subst :, ,$(h)))'; \
		echo '--cfg=CONFIG_RUSTC_HAS_$(firstword $(subst :, ,$(h)))="y"';)) \
	sed -n -e 's/^\(CONFIG_[A-Za-z0-9_]*\)=y$$/--cfg=\1\n--cfg=\1="y"/p' \
	       -e 's/^\(CONFIG_[A-Za-z0-9_]*\)="\(.*\)"$$/--cfg=\1="\2"/p' \
	       -e 's/^\(CONFIG_[A-Za-z0-9_]*\)=\([^"y].*\)$$/--cfg=\1="\2"/p' $(NVPM_KCONFIG) | \
	grep -Ev -- '^--cfg=CONFIG_(RUSTC_|($(subst $(space),|,$(nvpm_cr_subsystems)))(=|$$))'; } >$@

$(nvpm_cr)/rustc_cfg: $(NVPM_KCONFIG) FORCE
	$(call if_changed,nvpm_rustc_cfg)

# x86 hands rustc a target.json (the core crate depends on it, as in the
# pinned release's rust/Makefile); arm64 names a built-in target
# (kbuild/rustflags.mk), and the generator refuses arm64.
nvpm_cr_target := $(if $(CONFIG_X86),target.json)

# target.json by the pinned release's own generator, from this kernel's
# configuration with the rustc that builds the module. Kernels before 6.9
# name the x86 mitigations without MITIGATION_ (RETPOLINE, RETHUNK, SLS):
# the generator is told their 6.9 names, or it would leave them out.
nvpm_cr_renamed := RETPOLINE RETHUNK SLS CALL_DEPTH_TRACKING
quiet_cmd_nvpm_target = GEN     $@
      cmd_nvpm_target = mkdir -p $(@D); \
	$(NVPM_RUSTC) --edition=2021 -O -o $(nvpm_cr)/generate_rust_target \
		$(NVPM_CARRIED_SRC)/scripts/generate_rust_target.rs; \
	{ grep -v '^CONFIG_RUSTC_VERSION=' $(NVPM_KCONFIG); \
	  sed -n -E 's/^CONFIG_($(subst $(space),|,$(nvpm_cr_renamed)))=y$$/CONFIG_MITIGATION_\1=y/p' $(NVPM_KCONFIG); \
	  echo CONFIG_RUSTC_VERSION=$(NVPM_RUSTC_VERSION); } | \
	$(nvpm_cr)/generate_rust_target >$@

$(nvpm_cr)/target.json: $(NVPM_KCONFIG) FORCE
	$(call if_changed,nvpm_target)

# The flags, for tests/kocheck/negative.sh.
quiet_cmd_nvpm_rustflags = GEN     $@
      cmd_nvpm_rustflags = mkdir -p $(@D); echo ' $(NVPM_CARRIED_RUSTFLAGS) ' >$@
$(nvpm_cr)/rustflags: FORCE
	$(call if_changed,nvpm_rustflags)

# --- what this kernel has, by compile tests -----------------------------------
# kbuild/carried/conftest.sh compiles a test of each kernel API that
# kbuild/carried/compat.h, helpers.c and the errname redirect below supply
# where the kernel lacks it, with the compiler and the flags Kbuild gives
# this module's C code (less its dependency file: the script writes one of
# the headers its tests read), and reads exports from the kernel's
# Module.symvers. Tests, not LINUX_VERSION_CODE: vendor kernels (RHEL,
# Ubuntu) backport APIs without changing the version, and NVIDIA's own
# conftest.sh decides its driver's interfaces the same way. Cached as the
# other outputs are: run again when the flags, the script or a header its
# tests read changes.
nvpm_cr_conftest_flags = $(filter-out -Wp$(comma)-MMD$(comma)% -Wp$(comma)-MD$(comma)%,$(c_flags))
quiet_cmd_nvpm_conftest = CONFTEST $@
      cmd_nvpm_conftest = mkdir -p $(@D); $(CONFIG_SHELL) $(src)/kbuild/carried/conftest.sh \
	$@ $(depfile) $(objtree)/Module.symvers $(CC) $(nvpm_cr_conftest_flags)
$(nvpm_cr)/conftest.h: $(src)/kbuild/carried/conftest.sh FORCE
	$(call if_changed_dep,nvpm_conftest)

# nvpm_cr_have API: y where conftest.h says this kernel has NVPM_HAVE_<API>.
nvpm_cr_have = $(shell grep -qsx '.define NVPM_HAVE_$(1) 1' $(nvpm_cr)/conftest.h && echo y)
# compat.h, first in what bindgen and the compiler read of the helpers; it
# includes conftest.h by the name given here.
nvpm_cr_compat = -DNVPM_CONFTEST_H='"$(nvpm_cr_abs)/conftest.h"' -include $(abspath $(src))/kbuild/carried/compat.h

# compat.h as this kernel's preprocessor reads it, with the tests' results:
# built only when asked for (tests/kernels/kbuild-checks.sh, `make -C KDIR M=...
# build/carried/compat.i`).
CFLAGS_build/carried/compat.o = -DNVPM_CONFTEST_H='"$(nvpm_cr_abs)/conftest.h"'
$(nvpm_cr)/compat.i: $(src)/kbuild/carried/compat.h $(nvpm_cr)/conftest.h FORCE
	$(call if_changed_dep,cpp_i_c)

nvpm_cr_cfg := @$(nvpm_cr_abs)/rustc_cfg
# Target crates: the pinned crates are not ours to lint.
nvpm_cr_tflags = $(NVPM_CARRIED_RUSTFLAGS) $(nvpm_cr_cfg) -Awarnings \
	--sysroot=/dev/null -Zunstable-options -L$(nvpm_cr_abs)
nvpm_procmacro_ext := $(patsubst libname.%,%,$(shell $(NVPM_RUSTC) --print file-names \
	--crate-name name --crate-type proc-macro - </dev/null 2>/dev/null))

# rustc's dep-info has comment lines (env-dep), which fixdep before 6.3
# takes for file names.
nvpm_hash := \#
nvpm_cr_depfix = ; sed -i '/^$(nvpm_hash)/d' $(depfile)

# C functions the Rust objects call, redirected to helpers.c where the
# kernel's own would be wrong: printk's %pA hands a core::fmt::Arguments to
# the kernel's rust_fmt_argument, which has none without CONFIG_RUST and
# with it reads the struct as the kernel's rustc laid it out, not as the
# carried core did (another rustc: an oops); nvpm_carried_printk formats
# with the carried crate's own. errname, where the kernel does not export
# it (NVPM_HAVE_ERRNAME, conftest.h below; upstream exports it from 6.7 on),
# goes to nvpm_carried_errname, which names no error: numbers are printed.
# Read when the objects are built, after conftest.h (core.o, on which every
# crate depends, and the module's object, which depends on the kernel crate).
nvpm_cr_redirect = _printk=nvpm_carried_printk $(if $(call nvpm_cr_have,ERRNAME),,errname=nvpm_carried_errname)
nvpm_cr_redirect_syms = $(if $(strip $(nvpm_cr_redirect)),; $(OBJCOPY) $(addprefix --redefine-sym ,$(nvpm_cr_redirect)) $@)
# objtool on the object: 6.1's cmd_objtool starts with its own "; ",
# 5.10's is a command of its own.
nvpm_cr_objtool = $(if $(filter ;%,$(strip $(cmd_objtool))),$(cmd_objtool),$(if $(strip $(cmd_objtool)),; $(cmd_objtool)))

quiet_cmd_nvpm_cr_lib = RUSTC C  $@
      cmd_nvpm_cr_lib = RUSTC_BOOTSTRAP=1 OBJTREE=$(nvpm_cr_abs) $(nvpm-env) $(NVPM_RUSTC) \
	$(nvpm_cr_tflags) $(nvpm-flags) --crate-type rlib --crate-name $(nvpm-name) \
	--emit=dep-info=$(depfile) --emit=metadata=$(nvpm_cr)/lib$(nvpm-name).rmeta \
	--emit=obj=$@ $< $(nvpm_cr_depfix) $(nvpm-post) $(nvpm_cr_redirect_syms) $(nvpm_cr_objtool)

quiet_cmd_nvpm_cr_host = RUSTC H  $@
      cmd_nvpm_cr_host = RUSTC_BOOTSTRAP=1 $(NVPM_RUSTC) -O -Cstrip=debuginfo --cap-lints=allow \
	-L$(nvpm_cr_abs) $(nvpm-flags) --crate-type rlib --crate-name $(nvpm-name) \
	--emit=dep-info=$(depfile) --emit=link=$@ $< $(nvpm_cr_depfix)

quiet_cmd_nvpm_cr_procmacro = RUSTC P  $@
      cmd_nvpm_cr_procmacro = RUSTC_BOOTSTRAP=1 $(NVPM_RUSTC) -O -Cstrip=debuginfo \
	--cap-lints=allow -L$(nvpm_cr_abs) $(nvpm_cr_cfg) $(nvpm-flags) \
	-Clinker=$(NVPM_HOSTCC) --extern proc_macro --crate-type proc-macro \
	--crate-name $(nvpm-name) --emit=dep-info=$(depfile) --emit=link=$@ $< $(nvpm_cr_depfix)

# --- host crates and proc macros -------------------------------------------
nvpm_pm_externs = --extern proc_macro2=$(nvpm_cr_abs)/libproc_macro2.rlib \
	--extern quote=$(nvpm_cr_abs)/libquote.rlib --extern syn=$(nvpm_cr_abs)/libsyn.rlib
nvpm_pm_deps = $(nvpm_cr)/libproc_macro2.rlib $(nvpm_cr)/libquote.rlib $(nvpm_cr)/libsyn.rlib

$(nvpm_cr)/libproc_macro2.rlib: private nvpm-name := proc_macro2
$(nvpm_cr)/libproc_macro2.rlib: private nvpm-flags = --edition=2021 --cfg='feature="proc-macro"' \
	--cfg=wrap_proc_macro $(if $(call nvpm_rustc_min,108800),--cfg=proc_macro_span_file --cfg=proc_macro_span_location)
$(nvpm_cr)/libproc_macro2.rlib: $(nvpm_cr_src)/proc-macro2/lib.rs FORCE
	$(call if_changed_dep,nvpm_cr_host)

$(nvpm_cr)/libquote.rlib: private nvpm-name := quote
$(nvpm_cr)/libquote.rlib: private nvpm-flags = --edition=2018 --cfg='feature="proc-macro"' \
	--extern proc_macro2=$(nvpm_cr_abs)/libproc_macro2.rlib
$(nvpm_cr)/libquote.rlib: $(nvpm_cr_src)/quote/lib.rs $(nvpm_cr)/libproc_macro2.rlib FORCE
	$(call if_changed_dep,nvpm_cr_host)

$(nvpm_cr)/libsyn.rlib: private nvpm-name := syn
$(nvpm_cr)/libsyn.rlib: private nvpm-flags = --edition=2021 \
	$(foreach f,clone-impls derive full parsing printing proc-macro visit visit-mut,--cfg='feature="$(f)"') \
	--extern proc_macro2=$(nvpm_cr_abs)/libproc_macro2.rlib --extern quote=$(nvpm_cr_abs)/libquote.rlib
$(nvpm_cr)/libsyn.rlib: $(nvpm_cr_src)/syn/lib.rs $(nvpm_cr)/libquote.rlib FORCE
	$(call if_changed_dep,nvpm_cr_host)

$(nvpm_cr)/libmacros.$(nvpm_procmacro_ext): private nvpm-name := macros
$(nvpm_cr)/libmacros.$(nvpm_procmacro_ext): private nvpm-flags = --edition=2021 $(nvpm_pm_externs)
$(nvpm_cr)/libmacros.$(nvpm_procmacro_ext): $(nvpm_cr_src)/macros/lib.rs $(nvpm_pm_deps) $(nvpm_cr)/rustc_cfg FORCE
	$(call if_changed_dep,nvpm_cr_procmacro)

$(nvpm_cr)/libpin_init_internal.$(nvpm_procmacro_ext): private nvpm-name := pin_init_internal
$(nvpm_cr)/libpin_init_internal.$(nvpm_procmacro_ext): private nvpm-flags = --edition=2021 \
	--cfg=kernel --cfg=USE_RUSTC_FEATURES $(nvpm_pm_externs)
$(nvpm_cr)/libpin_init_internal.$(nvpm_procmacro_ext): $(nvpm_cr_src)/pin-init/internal/src/lib.rs \
	$(nvpm_pm_deps) $(nvpm_cr)/rustc_cfg FORCE
	$(call if_changed_dep,nvpm_cr_procmacro)

$(nvpm_cr)/libzerocopy_derive.$(nvpm_procmacro_ext): private nvpm-name := zerocopy_derive
$(nvpm_cr)/libzerocopy_derive.$(nvpm_procmacro_ext): private nvpm-flags = --edition=2021 \
	--cfg=zerocopy_unstable_linux $(nvpm_pm_externs)
$(nvpm_cr)/libzerocopy_derive.$(nvpm_procmacro_ext): $(nvpm_cr_src)/zerocopy-derive/lib.rs \
	$(nvpm_pm_deps) $(nvpm_cr)/rustc_cfg FORCE
	$(call if_changed_dep,nvpm_cr_procmacro)

# --- core, compiler_builtins and the leaf crates -----------------------------
# core must not define the soft-float and 128-bit intrinsics the kernel has
# (or that compiler_builtins turns into panics): renamed as rust/Makefile does
# (on arm64 the 128-bit shifts too, which its lib/ defines).
nvpm_redirect_intrinsics := __addsf3 __eqsf2 __extendsfdf2 __gesf2 __lesf2 __ltsf2 \
	__mulsf3 __nesf2 __truncdfsf2 __unordsf2 __adddf3 __eqdf2 __ledf2 __ltdf2 __muldf3 \
	__unorddf2 __muloti4 __multi3 __udivmodti4 __udivti3 __umodti3 \
	$(if $(CONFIG_ARM64),__ashrti3 __ashlti3 __lshrti3)

$(nvpm_cr)/core.o: private nvpm-name := core
$(nvpm_cr)/core.o: private nvpm-flags = --edition=$(if $(call nvpm_rustc_min,108700),2024,2021) \
	--cfg=no_fp_fmt_parse
$(nvpm_cr)/core.o: private nvpm-post = ; $(OBJCOPY) \
	$(foreach s,$(nvpm_redirect_intrinsics),--redefine-sym $(s)=__rust$(s)) $@
$(nvpm_cr)/core.o: $(nvpm_rust_lib_src)/core/src/lib.rs $(addprefix $(nvpm_cr)/,$(nvpm_cr_target)) $(nvpm_cr)/rustc_cfg \
	$(nvpm_cr)/rustflags $(nvpm_cr)/conftest.h FORCE
	$(call if_changed_dep,nvpm_cr_lib)

nvpm_cr_base = --edition=2021 --extern core=$(nvpm_cr_abs)/libcore.rmeta
$(nvpm_cr)/compiler_builtins.o: private nvpm-name := compiler_builtins
$(nvpm_cr)/compiler_builtins.o: private nvpm-flags = $(nvpm_cr_base)
$(nvpm_cr)/compiler_builtins.o: private nvpm-post = ; $(OBJCOPY) -w -W '__*' $@
$(nvpm_cr)/compiler_builtins.o: $(nvpm_cr_src)/compiler_builtins.rs $(nvpm_cr)/core.o FORCE
	$(call if_changed_dep,nvpm_cr_lib)

nvpm_cr_leaf = $(nvpm_cr_base) --extern compiler_builtins=$(nvpm_cr_abs)/libcompiler_builtins.rmeta
$(nvpm_cr)/ffi.o: private nvpm-name := ffi
$(nvpm_cr)/ffi.o: private nvpm-flags = $(nvpm_cr_leaf)
$(nvpm_cr)/ffi.o: $(nvpm_cr_src)/ffi.rs $(nvpm_cr)/compiler_builtins.o FORCE
	$(call if_changed_dep,nvpm_cr_lib)

$(nvpm_cr)/build_error.o: private nvpm-name := build_error
$(nvpm_cr)/build_error.o: private nvpm-flags = $(nvpm_cr_leaf)
$(nvpm_cr)/build_error.o: $(nvpm_cr_src)/build_error.rs $(nvpm_cr)/compiler_builtins.o FORCE
	$(call if_changed_dep,nvpm_cr_lib)

$(nvpm_cr)/zerocopy.o: private nvpm-name := zerocopy
$(nvpm_cr)/zerocopy.o: private nvpm-env := CARGO_PKG_VERSION=$(shell sed -n 's/^zerocopy-envs.*//;s/^ *CARGO_PKG_VERSION=\([0-9.]*\).*/\1/p' $(nvpm_cr_src)/Makefile)
$(nvpm_cr)/zerocopy.o: private nvpm-flags = $(nvpm_cr_leaf) --cfg=no_fp_fmt_parse \
	--extern zerocopy_derive=$(nvpm_cr_abs)/libzerocopy_derive.$(nvpm_procmacro_ext)
$(nvpm_cr)/zerocopy.o: $(nvpm_cr_src)/zerocopy/src/lib.rs $(nvpm_cr)/compiler_builtins.o \
	$(nvpm_cr)/libzerocopy_derive.$(nvpm_procmacro_ext) FORCE
	$(call if_changed_dep,nvpm_cr_lib)

$(nvpm_cr)/pin_init.o: private nvpm-name := pin_init
$(nvpm_cr)/pin_init.o: private nvpm-flags = $(nvpm_cr_leaf) --cfg=kernel --cfg=USE_RUSTC_FEATURES \
	--extern pin_init_internal=$(nvpm_cr_abs)/libpin_init_internal.$(nvpm_procmacro_ext) \
	--extern macros=$(nvpm_cr_abs)/libmacros.$(nvpm_procmacro_ext)
$(nvpm_cr)/pin_init.o: $(nvpm_cr_src)/pin-init/src/lib.rs $(nvpm_cr)/compiler_builtins.o \
	$(nvpm_cr)/libpin_init_internal.$(nvpm_procmacro_ext) $(nvpm_cr)/libmacros.$(nvpm_procmacro_ext) FORCE
	$(call if_changed_dep,nvpm_cr_lib)

# --- bindings of this kernel's headers ----------------------------------------
nvpm_cr_bindgen_params := $(shell grep -Ev '^\#|^$$' $(nvpm_cr_src)/bindgen_parameters 2>/dev/null)
quiet_cmd_nvpm_cr_bindgen = BINDGEN $@
      cmd_nvpm_cr_bindgen = mkdir -p $(@D); $(NVPM_BINDGEN) $< $(nvpm-bindgen-flags) \
	--rust-target $(NVPM_BINDGEN_RUST_TARGET) --use-core --with-derive-default \
	--ctypes-prefix ffi --no-layout-tests --no-debug '.*' \
	--enable-function-attribute-detection -o $@ -- $(nvpm_bindgen_c_flags) \
	-DMODULE $(nvpm-bindgen-cflags) $(nvpm-post)

$(nvpm_cr)/rust/bindings/bindings_generated.rs: private nvpm-bindgen-flags = $(nvpm_cr_bindgen_params)
# Where the fortified string functions are not overloads of their own
# (5.10's string.h), a fortified kernel's memchr is an inline definition,
# which bindgen skips: the bindings then read the plain declarations.
nvpm_cr_nofortify := $(if $(shell grep -qs __overloadable $(srctree)/include/linux/fortify-string.h && echo y),,-D__NO_FORTIFY)
$(nvpm_cr)/rust/bindings/bindings_generated.rs: private nvpm-bindgen-cflags = -I$(nvpm_cr_src)/bindings \
	$(nvpm_cr_compat) $(nvpm_cr_nofortify)
$(nvpm_cr)/rust/bindings/bindings_generated.rs: private nvpm-post = ; \
	sed -Ei 's/pub const RUST_CONST_HELPER_([a-zA-Z0-9_]*)/pub const \1/g' $@
$(nvpm_cr)/rust/bindings/bindings_generated.rs: $(src)/kbuild/carried/bindings_helper.h $(nvpm_cr)/conftest.h FORCE
	$(call if_changed_dep,nvpm_cr_bindgen)

$(nvpm_cr)/rust/bindings/bindings_helpers_generated.rs: private nvpm-bindgen-flags = \
	--blocklist-type '.*' --allowlist-var '' --allowlist-function 'rust_helper_.*'
$(nvpm_cr)/rust/bindings/bindings_helpers_generated.rs: private nvpm-bindgen-cflags = \
	-I$(nvpm_cr_src)/helpers $(nvpm_cr_compat) \
	-Wno-missing-prototypes -Wno-missing-declarations
$(nvpm_cr)/rust/bindings/bindings_helpers_generated.rs: private nvpm-post = ; \
	sed -Ei 's/pub fn rust_helper_([a-zA-Z0-9_]*)/\#[link_name="rust_helper_\1"]\n    pub fn \1/g' $@
$(nvpm_cr)/rust/bindings/bindings_helpers_generated.rs: $(src)/kbuild/carried/helpers.c $(nvpm_cr)/conftest.h FORCE
	$(call if_changed_dep,nvpm_cr_bindgen)

nvpm_cr_ffi_pin = $(nvpm_cr_leaf) --extern ffi=$(nvpm_cr_abs)/libffi.rmeta \
	--extern pin_init=$(nvpm_cr_abs)/libpin_init.rmeta
$(nvpm_cr)/bindings.o: private nvpm-name := bindings
$(nvpm_cr)/bindings.o: private nvpm-flags = $(nvpm_cr_ffi_pin)
$(nvpm_cr)/bindings.o: $(nvpm_cr_src)/bindings/lib.rs $(nvpm_cr)/ffi.o $(nvpm_cr)/pin_init.o \
	$(nvpm_cr)/rust/bindings/bindings_generated.rs \
	$(nvpm_cr)/rust/bindings/bindings_helpers_generated.rs FORCE
	$(call if_changed_dep,nvpm_cr_lib)

# --- the kernel crate -----------------------------------------------------------
quiet_cmd_nvpm_cr_rscpp = RSCPP   $@
      cmd_nvpm_cr_rscpp = mkdir -p $(@D); $(CPP) $(c_flags) -xc -C -P $< | \
	sed '1,/^\/\/ Cut here.$$/d' >$@

nvpm_cr_arch_rs := $(foreach f,generated_arch_static_branch_asm generated_arch_warn_asm \
	generated_arch_reachable_asm,$(nvpm_cr)/rust/kernel/$(f).rs)
$(nvpm_cr)/rust/kernel/%.rs: $(nvpm_cr_src)/kernel/%.rs.S FORCE
	$(call if_changed_dep,nvpm_cr_rscpp)

nvpm_cr_kernel_externs = $(nvpm_cr_ffi_pin) \
	--extern build_error=$(nvpm_cr_abs)/libbuild_error.rmeta \
	--extern macros=$(nvpm_cr_abs)/libmacros.$(nvpm_procmacro_ext) \
	--extern bindings=$(nvpm_cr_abs)/libbindings.rmeta \
	--extern zerocopy=$(nvpm_cr_abs)/libzerocopy.rmeta \
	--extern zerocopy_derive=$(nvpm_cr_abs)/libzerocopy_derive.$(nvpm_procmacro_ext)
$(nvpm_cr)/kernel.o: private nvpm-name := kernel
$(nvpm_cr)/kernel.o: private nvpm-flags = $(nvpm_cr_kernel_externs)
quiet_cmd_nvpm_cr_prepare = PREPARE $@
      cmd_nvpm_cr_prepare = $(CONFIG_SHELL) $(src)/kbuild/carried-prepare.sh $(nvpm_cr_src) $(nvpm_cr)/src; touch $@
$(nvpm_cr)/src/kernel/lib.rs: $(src)/kbuild/carried-prepare.sh $(nvpm_cr_src)/kernel/lib.rs
	$(call cmd,nvpm_cr_prepare)

$(nvpm_cr)/kernel.o: $(nvpm_cr)/src/kernel/lib.rs $(nvpm_cr)/build_error.o $(nvpm_cr)/pin_init.o \
	$(nvpm_cr)/bindings.o $(nvpm_cr)/zerocopy.o $(nvpm_cr_arch_rs) FORCE
	$(call if_changed_dep,nvpm_cr_lib)

# --- the kernel crate's C helpers, compiled against this kernel's headers ----
$(nvpm_cr)/helpers.o: $(src)/kbuild/carried/helpers.c $(nvpm_cr)/conftest.h FORCE
	$(call if_changed_rule,cc_o_c)
CFLAGS_REMOVE_build/carried/helpers.o = -Wmissing-prototypes -Wmissing-declarations
CFLAGS_build/carried/helpers.o = -I$(nvpm_cr_src)/helpers $(nvpm_cr_compat)

nvpm_cr_objs := core.o compiler_builtins.o ffi.o build_error.o zerocopy.o pin_init.o \
	bindings.o kernel.o helpers.o
targets += $(addprefix build/carried/,$(nvpm_cr_objs) rustc_cfg $(nvpm_cr_target) rustflags conftest.h compat.i \
	libproc_macro2.rlib libquote.rlib libsyn.rlib libmacros.$(nvpm_procmacro_ext) \
	libpin_init_internal.$(nvpm_procmacro_ext) libzerocopy_derive.$(nvpm_procmacro_ext) \
	rust/bindings/bindings_generated.rs rust/bindings/bindings_helpers_generated.rs) $(patsubst $(nvpm_cr)/%,build/carried/%,$(nvpm_cr_arch_rs))
