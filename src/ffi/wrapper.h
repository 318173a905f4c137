/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* bindgen input: the two C ABIs the module speaks. */
#include <linux/scatterlist.h>
#include <linux/device.h>
#include "nv-p2p.h"
#include "peer_mem.h"
#include "shim.h"
