// SPDX-License-Identifier: GPL-2.0
/*
 * ofed_hca_test: plays an HCA driver's part against MOFED's real
 * peer-memory core (test-only, never product code). Built against the
 * headers and Module.symvers MOFED's DKMS build leaves in
 * /usr/src/ofa_kernel/<arch>/<kernel> (tests/neighbours/ofed.sh), it
 * registers memory as mlx5_ib does for a user MR: ib_umem_get_peer() from
 * the registering process, then ib_umem_activate_invalidation_notifier();
 * deregistration is ib_umem_stop_invalidation_notifier() then
 * ib_umem_release() (MOFED 25.10 drivers/infiniband/core/peer_mem.c, the
 * comments above those functions). What any client of the core must give
 * an HCA is checked here, not how a client is built: the SG table covers
 * the range, and every DMA segment is the device's.
 *
 * debugfs /sys/kernel/debug/ofed_hca_test/ctl, written by the process
 * whose memory it registers:
 *   reg VA SIZE [inval]  register; reading ctl gives "mr ID nents N
 *                        bytes B first 0xDMA" or "error -ERRNO"
 *   dereg ID             deregister
 * and mrs lists "ID VA SIZE nents N bytes B invalidated 0|1" per MR.
 *
 * Locking: hca.lock (a mutex) guards the MR list and the last answer. The
 * core calls the invalidation function with its mapping_lock held and may
 * block registrations on it, so the function takes no lock of ours; it
 * marks the MR with an atomic. A deregistration stops the notifier before
 * it frees the MR, so no invalidation runs on a freed MR.
 */
#undef pr_fmt /* compat-2.6.h, included first, defines it */
#define pr_fmt(fmt) "ofed_hca_test: " fmt

#include <linux/debugfs.h>
#include <linux/dma-mapping.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("An HCA driver's part against MOFED's peer-memory core (test-only)");

static char *pci_dev;
module_param(pci_dev, charp, 0444);
MODULE_PARM_DESC(pci_dev, "PCI device (DDDD:BB:DD.F) the HCA does DMA with; default: the first one");

struct hca_mr {
	struct list_head node;
	int id;
	unsigned long va;
	size_t size;
	struct ib_umem *umem;
	bool notifier;
	atomic_t invalidated;
	unsigned int nents;
	u64 bytes;
};

static struct {
	struct mutex lock; /* the list, next_id and answer */
	struct list_head mrs;
	int next_id;
	char answer[96];
	struct ib_device *ibdev;
	struct pci_dev *pdev;
	unsigned int old_max_seg_size;
	struct dentry *dir;
} hca;

/* The core's invalidation, with its mapping_lock held: no lock of ours. */
static void hca_invalidate(struct ib_umem *umem, void *priv)
{
	struct hca_mr *mr = priv;

	atomic_set(&mr->invalidated, 1);
}

static int hca_reg(unsigned long va, size_t size, bool inval)
{
	struct scatterlist *sg;
	struct hca_mr *mr;
	struct ib_umem *umem;
	unsigned int i;
	u64 first = 0;

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return -ENOMEM;
	umem = ib_umem_get_peer(hca.ibdev, va, size, IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
				IB_ACCESS_REMOTE_READ, inval ? IB_PEER_MEM_INVAL_SUPP : 0);
	if (IS_ERR(umem)) {
		kfree(mr);
		return PTR_ERR(umem);
	}
	/* As mlx5 building its MTT: read the table before activating. */
	for_each_sgtable_dma_sg(&umem->sgt_append.sgt, sg, i) {
		if (!i)
			first = sg_dma_address(sg);
		mr->bytes += sg_dma_len(sg);
	}
	mr->nents = umem->sgt_append.sgt.nents;
	mr->umem = umem;
	mr->va = va;
	mr->size = size;
	if (inval) {
		ib_umem_activate_invalidation_notifier(umem, hca_invalidate, mr);
		mr->notifier = true;
	}
	mutex_lock(&hca.lock);
	mr->id = hca.next_id++;
	list_add_tail(&mr->node, &hca.mrs);
	snprintf(hca.answer, sizeof(hca.answer), "mr %d nents %u bytes %llu first 0x%llx\n", mr->id, mr->nents,
		 mr->bytes, first);
	mutex_unlock(&hca.lock);
	return 0;
}

static void hca_release(struct hca_mr *mr)
{
	if (mr->notifier)
		ib_umem_stop_invalidation_notifier(mr->umem);
	ib_umem_release(mr->umem);
	kfree(mr);
}

static int hca_dereg(int id)
{
	struct hca_mr *mr, *found = NULL;

	mutex_lock(&hca.lock);
	list_for_each_entry(mr, &hca.mrs, node) {
		if (mr->id == id) {
			found = mr;
			list_del(&mr->node);
			break;
		}
	}
	mutex_unlock(&hca.lock);
	if (!found)
		return -ENOENT;
	hca_release(found);
	return 0;
}

static ssize_t ctl_write(struct file *f, const char __user *ubuf, size_t len, loff_t *pos)
{
	char buf[96], word[8];
	unsigned long va;
	size_t size;
	int id, n, ret;

	if (len >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, len))
		return -EFAULT;
	buf[len] = 0;
	n = sscanf(buf, "reg %lx %zu %7s", &va, &size, word);
	if (n >= 2) {
		ret = hca_reg(va, size, n == 3 && !strcmp(word, "inval"));
	} else if (sscanf(buf, "dereg %d", &id) == 1) {
		ret = hca_dereg(id);
		if (!ret) {
			mutex_lock(&hca.lock);
			snprintf(hca.answer, sizeof(hca.answer), "dereg %d\n", id);
			mutex_unlock(&hca.lock);
		}
	} else {
		return -EINVAL;
	}
	if (ret) {
		mutex_lock(&hca.lock);
		snprintf(hca.answer, sizeof(hca.answer), "error %d\n", ret);
		mutex_unlock(&hca.lock);
	}
	return len;
}

static ssize_t ctl_read(struct file *f, char __user *ubuf, size_t len, loff_t *pos)
{
	char buf[96];

	mutex_lock(&hca.lock);
	strscpy(buf, hca.answer, sizeof(buf));
	mutex_unlock(&hca.lock);
	return simple_read_from_buffer(ubuf, len, pos, buf, strlen(buf));
}

static const struct file_operations ctl_fops = {
	.owner = THIS_MODULE,
	.read = ctl_read,
	.write = ctl_write,
};

static int mrs_show(struct seq_file *s, void *unused)
{
	struct hca_mr *mr;

	mutex_lock(&hca.lock);
	list_for_each_entry(mr, &hca.mrs, node)
		seq_printf(s, "%d 0x%lx %zu nents %u bytes %llu invalidated %d\n", mr->id, mr->va, mr->size,
			   mr->nents, mr->bytes, atomic_read(&mr->invalidated));
	mutex_unlock(&hca.lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(mrs);

static struct pci_dev *hca_find_pci_device(void)
{
	unsigned int domain, bus, slot, fn;

	if (!pci_dev)
		return pci_get_device(PCI_ANY_ID, PCI_ANY_ID, NULL);
	if (sscanf(pci_dev, "%x:%x:%x.%x", &domain, &bus, &slot, &fn) == 4)
		return pci_get_domain_bus_and_slot(domain, bus, PCI_DEVFN(slot, fn));
	return NULL;
}

static int __init hca_init(void)
{
	mutex_init(&hca.lock);
	INIT_LIST_HEAD(&hca.mrs);
	hca.pdev = hca_find_pci_device();
	if (!hca.pdev) {
		pr_err("no PCI device to act as the HCA\n");
		return -ENODEV;
	}
	/*
	 * The core reads only dma_device of the HCA's ib_device on the peer
	 * path (peer_mem.c: dma_map, dma_unmap): an unregistered device will do.
	 */
	hca.ibdev = kzalloc(sizeof(*hca.ibdev), GFP_KERNEL);
	if (!hca.ibdev) {
		pci_dev_put(hca.pdev);
		return -ENOMEM;
	}
	hca.ibdev->dma_device = &hca.pdev->dev;
	/* As mlx5_core at probe: DMA segments of up to 2 GiB (a PCI function's
	 * default is 64 KiB); the old value comes back at unload. */
	if (hca.pdev->dev.dma_parms) {
		hca.old_max_seg_size = dma_get_max_seg_size(&hca.pdev->dev);
		dma_set_max_seg_size(&hca.pdev->dev, SZ_2G);
	}
	hca.dir = debugfs_create_dir("ofed_hca_test", NULL);
	debugfs_create_file("ctl", 0600, hca.dir, NULL, &ctl_fops);
	debugfs_create_file("mrs", 0400, hca.dir, NULL, &mrs_fops);
	pr_info("ready: dma_device %s, max_seg_size %u\n", pci_name(hca.pdev), dma_get_max_seg_size(&hca.pdev->dev));
	return 0;
}

static void __exit hca_exit(void)
{
	struct hca_mr *mr, *next;

	debugfs_remove_recursive(hca.dir);
	list_for_each_entry_safe(mr, next, &hca.mrs, node) {
		list_del(&mr->node);
		hca_release(mr);
	}
	kfree(hca.ibdev);
	if (hca.old_max_seg_size)
		dma_set_max_seg_size(&hca.pdev->dev, hca.old_max_seg_size);
	pci_dev_put(hca.pdev);
}

module_init(hca_init);
module_exit(hca_exit);
