/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Plumbing shared by the simulators (test infrastructure, not product code):
 * the debugfs "ctl" file, argument parsing and contract-violation reporting.
 *
 * A ctl file takes one command per write(2), e.g. "alloc 1M shuffled". The
 * command runs during the write; its reply (or an error message) is read back
 * from the same open file. write(2) returns the command's -errno on failure,
 * so `echo cmd > ctl` also works from a shell when the reply is not needed.
 */
#ifndef SIM_COMMON_H
#define SIM_COMMON_H

#include <linux/version.h>
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>

/* gpu_sim's test hooks for mofed_peer_sim's free_at= (not NVIDIA's API). */
int nvidia_sim_free(u64 va);
long nvidia_sim_callbacks_started(void);
unsigned int nvidia_sim_race_window_ms(void);

#define SIM_CMD_MAX_LEN 256
#define SIM_CMD_MAX_ARGS 10

/*
 * A contract violation is the client's fault: it is counted and logged at
 * KERN_ERR with a fixed wording that the guest tests look for. It must never
 * be a WARN (a WARNING: line fails every guest run).
 */
#define sim_violation(counter, fmt, ...)					\
	do {								\
		atomic_long_inc(counter);				\
		pr_err("contract violation: " fmt "\n", ##__VA_ARGS__);	\
	} while (0)

/* The reply of one ctl command: a growing text buffer. */
struct sim_reply {
	char *buf;
	size_t len;
	size_t cap;
};

static inline __printf(2, 3) void sim_reply(struct sim_reply *r,
					    const char *fmt, ...)
{
	va_list args;
	size_t need;
	int n;

	va_start(args, fmt);
	n = vsnprintf(NULL, 0, fmt, args);
	va_end(args);
	need = r->len + n + 1;
	if (need > r->cap) {
		size_t cap = max(need, 2 * r->cap);
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 11, 0)
		/* kvrealloc took the old size before 6.11. */
		char *buf = kvrealloc(r->buf, r->cap, cap, GFP_KERNEL);
#else
		char *buf = kvrealloc(r->buf, cap, GFP_KERNEL);
#endif

		if (!buf)
			return;	/* The reply is truncated; the command still ran. */
		r->buf = buf;
		r->cap = cap;
	}
	va_start(args, fmt);
	vsnprintf(r->buf + r->len, n + 1, fmt, args);
	va_end(args);
	r->len += n;
}

/* One ctl command: argv[0] is its name; run() returns 0 or -errno. */
struct sim_cmd {
	const char *name;
	int min_args;		/* not counting the name */
	int (*run)(int argc, char **argv, struct sim_reply *r);
};

/* What an open ctl file remembers between the write and the read. */
struct sim_ctl {
	struct mutex lock;	/* serialises commands on this open file */
	struct sim_reply reply;
	bool fresh;		/* the next read starts at the reply's start */
};

static inline int sim_ctl_open(struct inode *inode, struct file *file)
{
	struct sim_ctl *ctl = kzalloc(sizeof(*ctl), GFP_KERNEL);

	if (!ctl)
		return -ENOMEM;
	mutex_init(&ctl->lock);
	file->private_data = ctl;
	return nonseekable_open(inode, file);
}

static inline int sim_ctl_release(struct inode *inode, struct file *file)
{
	struct sim_ctl *ctl = file->private_data;

	kvfree(ctl->reply.buf);
	kfree(ctl);
	return 0;
}

static inline ssize_t sim_ctl_read(struct file *file, char __user *ubuf,
				   size_t len, loff_t *ppos)
{
	struct sim_ctl *ctl = file->private_data;
	ssize_t ret;

	mutex_lock(&ctl->lock);
	if (ctl->fresh) {
		*ppos = 0;
		ctl->fresh = false;
	}
	ret = simple_read_from_buffer(ubuf, len, ppos, ctl->reply.buf,
				      ctl->reply.len);
	mutex_unlock(&ctl->lock);
	return ret;
}

/* Splits @line in place into at most SIM_CMD_MAX_ARGS words. */
static inline int sim_split(char *line, char **argv)
{
	int argc = 0;
	char *word;

	while ((word = strsep(&line, " \t\n")) != NULL) {
		if (!*word)
			continue;
		if (argc == SIM_CMD_MAX_ARGS)
			return -E2BIG;
		argv[argc++] = word;
	}
	return argc;
}

/*
 * The write half of a ctl file: runs the command from @cmds named by the first
 * word. Each simulator wraps this in its own file_operations.write.
 */
static inline ssize_t sim_ctl_write(struct file *file,
				    const char __user *ubuf, size_t len,
				    loff_t *ppos, const struct sim_cmd *cmds,
				    size_t ncmds)
{
	struct sim_ctl *ctl = file->private_data;
	char line[SIM_CMD_MAX_LEN], *argv[SIM_CMD_MAX_ARGS];
	int argc, ret = -EINVAL;
	size_t i;

	if (len >= sizeof(line))
		return -E2BIG;
	if (copy_from_user(line, ubuf, len))
		return -EFAULT;
	line[len] = '\0';

	mutex_lock(&ctl->lock);
	ctl->reply.len = 0;
	ctl->fresh = true;
	argc = sim_split(line, argv);
	if (argc <= 0) {
		sim_reply(&ctl->reply, "error: empty or overlong command\n");
		ret = argc ? argc : -EINVAL;
		goto out;
	}
	for (i = 0; i < ncmds; i++) {
		if (strcmp(argv[0], cmds[i].name))
			continue;
		if (argc - 1 < cmds[i].min_args) {
			sim_reply(&ctl->reply, "error: %s needs %d argument(s)\n",
				  argv[0], cmds[i].min_args);
			goto out;
		}
		ret = cmds[i].run(argc, argv, &ctl->reply);
		if (ret && !ctl->reply.len)
			sim_reply(&ctl->reply, "error: %s failed: %d\n", argv[0], ret);
		goto out;
	}
	sim_reply(&ctl->reply, "error: unknown command '%s'\n", argv[0]);
out:
	mutex_unlock(&ctl->lock);
	return ret ? ret : len;
}

/* Defines @name##_fops, a ctl file running the commands of the array @cmds. */
#define SIM_CTL_FOPS(name, cmds)					\
static ssize_t name##_write(struct file *file, const char __user *ubuf,	\
			    size_t len, loff_t *ppos)			\
{									\
	return sim_ctl_write(file, ubuf, len, ppos, cmds,		\
			     ARRAY_SIZE(cmds));				\
}									\
static const struct file_operations name##_fops = {			\
	.owner = THIS_MODULE,						\
	.open = sim_ctl_open,						\
	.release = sim_ctl_release,					\
	.read = sim_ctl_read,						\
	.write = name##_write,						\
}

/* A number: decimal, or hex with 0x. */
/*
 * "reset" and "reset violations", the first part: checks the argument and
 * zeroes the n violation counters. Returns 1 when the other counters are
 * to be zeroed too ("reset"), 0 when not, -EINVAL on any other argument.
 */
static inline int sim_reset_violations(int argc, char **argv, atomic_long_t *violations,
				       int n, struct sim_reply *r)
{
	int i;

	if (argc > 1 && strcmp(argv[1], "violations")) {
		sim_reply(r, "error: reset takes nothing or 'violations'\n");
		return -EINVAL;
	}
	for (i = 0; i < n; i++)
		atomic_long_set(&violations[i], 0);
	return argc == 1;
}

static inline int sim_parse_u64(const char *s, u64 *v)
{
	return kstrtou64(s, 0, v);
}

/* A size: a number with an optional K, M or G suffix (binary units). */
static inline int sim_parse_size(const char *s, u64 *v)
{
	char *end;

	*v = memparse(s, &end);
	return (*end || end == s) ? -EINVAL : 0;
}

/*
 * A module parameter holding one of a fixed list of names (an enum), shown
 * and set by name: module_param_cb(x, &sim_enum_param_ops, &x_param, mode).
 */
struct sim_enum_param {
	const char *const *names;
	size_t count;
	int *value;
};

static inline int sim_enum_param_set(const char *val,
				     const struct kernel_param *kp)
{
	const struct sim_enum_param *p = kp->arg;
	char word[32];
	int i;

	strscpy(word, val, sizeof(word));
	i = match_string(p->names, p->count, strim(word));
	if (i < 0) {
		pr_err("invalid value '%s' for parameter %s\n", val, kp->name);
		return -EINVAL;
	}
	WRITE_ONCE(*p->value, i);
	return 0;
}

static inline int sim_enum_param_get(char *buf, const struct kernel_param *kp)
{
	const struct sim_enum_param *p = kp->arg;

	return sysfs_emit(buf, "%s\n", p->names[READ_ONCE(*p->value)]);
}

static const struct kernel_param_ops sim_enum_param_ops __maybe_unused = {
	.set = sim_enum_param_set,
	.get = sim_enum_param_get,
};

#endif /* SIM_COMMON_H */
