/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* bindgen over this prints its libclang's version (Kbuild reads it). */
#pragma message("clang version " __clang_version__)
