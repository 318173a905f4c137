/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* What src/shim.c offers the Rust side. */
#ifndef NVPM_SHIM_H
#define NVPM_SHIM_H

int nvpm_param_persistent_api_support(void);
int nvpm_param_peerdirect_support(void);

#endif /* NVPM_SHIM_H */
