// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The part of nvidia_peermem that Rust cannot express on 7.3: the version
 * modinfo and the two read-only (0444) module parameters, checked when parsed.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "shim.h"

MODULE_VERSION(NVPM_VERSION);

static int persistent_api_support = 1;
static int peerdirect_support;

/* Only 0 and 1 mean something; anything else fails the load. */
static int nvpm_param_set_01(const char *val, const struct kernel_param *kp)
{
	int v;

	if (kstrtoint(val, 0, &v) || (v != 0 && v != 1)) {
		pr_err("invalid value '%s' for parameter %s: use 0 or 1\n", val, kp->name);
		return -EINVAL;
	}
	*(int *)kp->arg = v;
	return 0;
}

static const struct kernel_param_ops nvpm_param_ops_01 = {
	.set = nvpm_param_set_01,
	.get = param_get_int,
};

module_param_cb(persistent_api_support, &nvpm_param_ops_01, &persistent_api_support, 0444);
MODULE_PARM_DESC(persistent_api_support,
		 "1 (default): one persistent client nv_mem; 0: revocable nv_mem plus persistent nv_mem_nc");
module_param_cb(peerdirect_support, &nvpm_param_ops_01, &peerdirect_support, 0444);
MODULE_PARM_DESC(peerdirect_support,
		 "0 (default): MOFED 5.4-3+ / DOCA (_ex client); 1: legacy MOFED 4.x-5.0 layout");

int nvpm_param_persistent_api_support(void)
{
	return READ_ONCE(persistent_api_support);
}

int nvpm_param_peerdirect_support(void)
{
	return READ_ONCE(peerdirect_support);
}
