// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A QEMU TCG plugin for `make bench-profile` (tests/bench/README.md): counts
 * how often each translation block runs and writes, at exit, one line per
 * block of kernel code that ran: "VADDR INSNS EXECS" (hex, decimal, decimal).
 * Guest instructions per symbol are then INSNS x EXECS summed by address.
 *
 * Built against the few entry points it uses of QEMU's plugin API (declared
 * here: Debian ships no qemu-plugin.h), which QEMU 8.2 to 10.x export with
 * these signatures. Argument: out=PATH (default tbcount.out).
 */
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct {
	const char *target_name;
	struct {
		int min, cur;
	} version;
} qemu_info_t;
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
					  void (*cb)(unsigned int vcpu, void *udata),
					  int flags, void *udata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
				    void (*cb)(qemu_plugin_id_t, void *udata), void *udata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);

#define QEMU_PLUGIN_CB_NO_REGS 0
#define KERNEL_HALF 0xffff800000000000ull

__attribute__((visibility("default"))) int qemu_plugin_version = 4;

/* One translation of a block; a block translated again gets another. */
struct block {
	uint64_t vaddr, insns, execs;
	struct block *next;
};

static struct block *blocks;
static const char *out_path = "tbcount.out";

/* With -icount the vCPUs run in turn on one thread: no locking needed. */
static void on_exec(unsigned int vcpu, void *udata)
{
	(void)vcpu;
	((struct block *)udata)->execs++;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	struct block *b;

	(void)id;
	if (qemu_plugin_tb_vaddr(tb) < KERNEL_HALF)
		return;
	b = calloc(1, sizeof(*b));
	if (!b)
		abort();
	b->vaddr = qemu_plugin_tb_vaddr(tb);
	b->insns = qemu_plugin_tb_n_insns(tb);
	b->next = blocks;
	blocks = b;
	qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS, b);
}

static void on_exit_(qemu_plugin_id_t id, void *udata)
{
	FILE *f = fopen(out_path, "w");
	struct block *b;

	(void)id;
	(void)udata;
	if (!f) {
		perror(out_path);
		return;
	}
	for (b = blocks; b; b = b->next)
		if (b->execs)
			fprintf(f, "%llx %llu %llu\n", (unsigned long long)b->vaddr,
				(unsigned long long)b->insns, (unsigned long long)b->execs);
	fclose(f);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
							       const qemu_info_t *info,
							       int argc, char **argv)
{
	int i;

	(void)info;
	for (i = 0; i < argc; i++)
		if (!strncmp(argv[i], "out=", 4))
			out_path = argv[i] + 4;
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, on_exit_, NULL);
	return 0;
}
