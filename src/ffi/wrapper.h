/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* bindgen input: the two C ABIs the module speaks. */
#include <linux/scatterlist.h>
#include <linux/device.h>
/* Full paths from Kbuild: a vendor header found at build time, or src/ffi/. */
#include NVPM_NV_P2P_HEADER
#include NVPM_PEER_MEM_HEADER
#include "shim.h"
