/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: per-CPU stamps that packets and readers pick up later:
 * the NIC IRQ and the NET_RX softirq run (copied into each packet at
 * netif_receive_skb), NAPI poll statistics, the last task switched in and the
 * last datagram copy on each CPU (read at each receive return). */
#ifndef NETLATD_STAMPS_CPU_BPF_H
#define NETLATD_STAMPS_CPU_BPF_H

/* The CPU's preempt count (x86; targ_preempt_count says which exists): a
 * per-CPU int up to 6.1 and from 6.15, a field of pcpu_hot in between. Weak:
 * the one this kernel lacks is 0, and its branch is never walked. */
extern const int __preempt_count __ksym __weak;
struct pcpu_hot___netlatd {
	int preempt_count;
} __attribute__((preserve_access_index));
extern const struct pcpu_hot___netlatd pcpu_hot __ksym __weak;

#define SOFTIRQ_OFFSET_NR 0x100        /* a softirq is being served */
#define HARDIRQ_NMI_MASK_NR 0xff0000   /* in a hard IRQ or an NMI */

/* How a program variant reads the preempt count, a compile-time constant:
 * not at all, by the variable's address (resolved when the program loads,
 * so only variants that never load elsewhere may name it), or from the
 * runqueue (no kernel symbol named). */
#define PC_NONE 0
#define PC_KSYM 1
#define PC_RUNQUEUE 2

/* This CPU's preempt count, where the plan found it (HookPlan::
 * preempt_count) and the variant reads it (`pc`); false where it cannot be
 * read. */
static __always_inline bool preempt_count_now(const struct cpu_state *cs, int pc, int *count)
{
	if (pc == PC_KSYM && targ_preempt_count == 1 && bpf_ksym_exists(&__preempt_count)) {
		*count = *(const int *)bpf_this_cpu_ptr(&__preempt_count);
	} else if (pc == PC_KSYM && targ_preempt_count == 2 && bpf_ksym_exists(&pcpu_hot)) {
		*count = ((const struct pcpu_hot___netlatd *)bpf_this_cpu_ptr(&pcpu_hot))->preempt_count;
	} else if (pc == PC_RUNQUEUE && targ_preempt_count == 3 && bpf_ksym_exists(bpf_rdonly_cast)) {
		/* Without CONFIG_KALLSYMS_ALL the verifier cannot resolve
		 * __preempt_count, but the running task's CFS queue is this
		 * CPU's and points to this CPU's runqueue, a static per-CPU
		 * variable too: the count sits at a fixed distance from it, the
		 * one their offsets in the per-CPU section give (the plan reads
		 * them from BTF). An int read through a struct that starts with
		 * one: bpf_core_cast takes structs. The address is this CPU's for
		 * good: found once, kept in the CPU's state (the task's and its
		 * queue's lines are cold where the count's is not). */
		__u64 at = cs->preempt_count_at;
		if (!at) {
			struct cfs_rq *cfs = bpf_get_current_task_btf()->se.cfs_rq;
			struct rq *rq = cfs ? cfs->rq : NULL;
			/* Kept for good: only once the runqueue says it is this
			 * CPU's. Until then the count is not read (no stamp is
			 * taken for NET_RX's), never guessed. */
			if (!rq || rq->cpu != (int)bpf_get_smp_processor_id())
				return false;
			/* A pointer stored in a map value loads back as a number. */
			*(void *volatile *)&((struct cpu_state *)cs)->preempt_count_at = (void *)rq + targ_preempt_count_from_rq;
			at = *(volatile __u64 *)&cs->preempt_count_at;
		}
		*count = bpf_core_cast((void *)at, struct refcount_struct)->refs.counter;
	} else {
		return false;
	}
	return true;
}

/* Whether this CPU is inside a NET_RX run now. softirq_entry sets in_net_rx
 * for NET_RX and clears it for every other vector; what ends a run is
 * softirq_exit where it is attached, else the preempt count: NET_RX is
 * running when "in NET_RX" was set by the last softirq entry and a softirq
 * is still being served, not interrupted by a hard IRQ (softirqs do not nest,
 * and a raise from a hard IRQ that interrupts the run is not the run's own).
 * Without CONFIG_KALLSYMS_ALL the verifier cannot find the variable by its
 * symbol: the plan takes the PC_RUNQUEUE variants there, or, where they
 * cannot load either, keeps softirq_exit and the variants that never read it. */
static __always_inline bool net_rx_running(const struct cpu_state *cs, int pc)
{
	if (!cs->in_net_rx)
		return false;
	/* `pc`: a compile-time constant, for the program variants that read the
	 * count (PC_KSYM's address is resolved when the program loads, and a
	 * kernel without CONFIG_KALLSYMS_ALL cannot resolve it: PC_RUNQUEUE). */
	if (pc == PC_NONE || targ_preempt_count == 0)
		return true;
	int count;
	if (!preempt_count_now(cs, pc, &count))
		return false;
	return (count & (SOFTIRQ_OFFSET_NR | HARDIRQ_NMI_MASK_NR)) == SOFTIRQ_OFFSET_NR;
}

/* Whether this runs in a task's own context, serving no softirq of any
 * vector (RCU's frees a closed UDP socket's queue; NET_RX refuses datagrams
 * on arrival) and no hard IRQ; `pc` as for net_rx_running. With the preempt
 * count unreadable where softirq_exit is detached, NET_RX alone is known. */
static __always_inline bool task_context(const struct cpu_state *cs, int pc)
{
	if (targ_preempt_count == 0)
		return !cs->in_softirq;
	if (pc == PC_NONE)
		return !net_rx_running(cs, PC_NONE);
	int count;
	if (!preempt_count_now(cs, pc, &count))
		return false;
	return !(count & (SOFTIRQ_OFFSET_NR | HARDIRQ_NMI_MASK_NR));
}

/* Whether `irq` is one of the interface's lines. */
static __always_inline bool irq_watched(int irq_signed)
{
	__u32 irq = (__u32)irq_signed;
	if (irq >= NETLATD_IRQ_BITMAP_WORDS * 64)
		return false;
	/* clang drops a mask it can prove redundant for a 32-bit value, but the
	 * ctx slot is 64 bits wide: hide the value from it so the verifier
	 * sees the index bounded. */
	__u64 word = irq >> 6;
	barrier_var(word);
	word &= NETLATD_IRQ_BITMAP_WORDS - 1;
	return cfg_irq_bitmap[word] & (1ULL << (irq & 63));
}

static __always_inline int on_irq_handler_entry(int irq)
{
	if (!irq_watched(irq))
		return 0;
	struct cpu_state *cs = this_cpu();
	if (cs)
		cs->cur_irq_ts = bpf_ktime_get_ns();
	COUNT(counters, NETLATD_CNT_IRQ);
	return 0;
}

/* Hard IRQs do not nest on Linux: leaving any handler leaves ours. */
static __always_inline int on_irq_handler_exit(void)
{
	struct cpu_state *cs = this_cpu();
	if (cs && cs->cur_irq_ts)
		cs->cur_irq_ts = 0;
	return 0;
}

/* The IRQ that counts for a packet is the one during which NET_RX was raised
 * for the run (or chain of runs, see below) that processed it; a later
 * interrupt of the same device on this CPU (a second RX interrupt, an MSI-X TX
 * or "other" vector) before the run must not replace it. So the raise, not
 * the run's entry, picks the IRQ. */
static __always_inline int on_softirq_raise(unsigned int vec, int pc)
{
	if (vec != NET_RX_SOFTIRQ_NR)
		return 0;
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	if (cs->cur_irq_ts && !cs->pend_irq_ts) {
		cs->pend_irq_ts = cs->cur_irq_ts;
		cs->pend_raise_ts = bpf_ktime_get_ns();
	} else if (!cs->pend_raise_ts && net_rx_running(cs, pc)) {
		/* NET_RX raised from within itself (budget spent, or a driver
		 * rescheduling its poll): the next run goes on polling that the
		 * same IRQ started, with the device's interrupts held off; its
		 * packets were picked up because of that IRQ. */
		cs->pend_irq_ts = cs->run_irq_ts;
		cs->pend_raise_ts = cs->run_raise_ts;
	} else if (!cs->pend_raise_ts) {
		cs->pend_raise_ts = bpf_ktime_get_ns();
	}
	return 0;
}

static __always_inline int on_softirq_entry(unsigned int vec)
{
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	if (!targ_preempt_count)
		cs->in_softirq = 1;
	if (vec != NET_RX_SOFTIRQ_NR) {
		/* Without softirq_exit, another vector's entry ends NET_RX's run
		 * (softirqs run one after another on a CPU). */
		if (targ_preempt_count && cs->in_net_rx)
			cs->in_net_rx = 0;
		return 0;
	}
	/* Nothing raised since the last run (a raise while the run was
	 * pending from elsewhere): its packets get no IRQ or raise stamp. */
	cs->run_irq_ts = cs->pend_irq_ts;
	cs->run_raise_ts = cs->pend_raise_ts;
	cs->pend_irq_ts = 0;
	cs->pend_raise_ts = 0;
	cs->softirq_ts = bpf_ktime_get_ns();
	cs->in_net_rx = 1;
	cs->ready_seen = 0;
	/* "ksoftirqd/N": a kernel thread, and the first 8 bytes of its name, in
	 * one load. Most runs are on a user task's way out of an interrupt or a
	 * bh-disabled section: its flags' line is the scheduler's and warm, its
	 * name's line is not, and is not read then. */
	struct task_struct *task = bpf_get_current_task_btf();
	cs->in_ksoftirqd = (task->flags & 0x00200000 /* PF_KTHREAD */) && *(__u64 *)task->comm == KSOFTIRQ_NAME8;
	return 0;
}

static __always_inline int on_softirq_exit(unsigned int vec)
{
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	cs->in_softirq = 0;
	if (vec == NET_RX_SOFTIRQ_NR)
		cs->in_net_rx = 0;
	return 0;
}

/* Per interval, for the watched devices: polls, packets per poll, and polls
 * that used their whole budget (the device had more than one run could take). */
static __always_inline int on_napi_poll(struct napi_struct *napi, int work, int budget)
{
	struct net_device *dev = napi->dev;
	if (!dev) /* the backlog's (lo, veth, RPS) */
		return 0;
	/* Each packet a device's poll passed through netif_receive_skb went
	 * up the stack in that same call: no data-ready call after this is of
	 * one of them (udp/order/queue.bpf.h call_datagram), and the datagrams
	 * a backlog (a container's veth) takes up next in this run keep theirs.
	 * A poll that used its whole budget hands its GRO list up after this
	 * point, filter first. The backlog's own poll needs no reset: it takes
	 * its packets up one by one. */
	if (READY_SIGNAL) {
		struct cpu_state *cs = this_cpu();
		if (cs)
			cs->ready_seen = 0;
	}
	if (!watched(dev, NETLATD_WATCH_NAPI))
		return 0;
	struct netlatd_counter_block *b = BLOCK(counters);
	BUMP(b, NETLATD_CNT_NAPI_POLLS, 1);
	BUMP(b, NETLATD_CNT_NAPI_PACKETS, work > 0 ? work : 0);
	if (work >= budget)
		BUMP(b, NETLATD_CNT_NAPI_BUDGET_FULL, 1);
	return 0;
}

/* Every context switch: which task is on this CPU, and since when, with no
 * clock read for a task that has no BPF task storage at all (most switches,
 * idle's too; one clock read is 91 ns on a PVM guest). Such a task has none
 * of ours (reader.bpf.h): its receive call, which makes ours, starts after
 * this switch-in, and a read that returns with this switch-in still its
 * last is marked NETLATD_PKT_ON_CPU_BEFORE_CALL (emit/record.bpf.h): that
 * is all the read start needs of it. A lookup of our own storage instead
 * cost more than the clock read. */
static __always_inline int on_sched_switch(struct task_struct *next)
{
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	cs->oncpu_tid = next->pid;
	cs->oncpu_ts = next->bpf_storage ? bpf_ktime_get_ns() : 0;
	return 0;
}

static __always_inline int on_skb_copy_datagram(void)
{
	struct cpu_state *cs = this_cpu();
	if (!cs)
		return 0;
	cs->copy_tid = (__u32)bpf_get_current_pid_tgid();
	cs->copy_ts = bpf_ktime_get_ns();
	return 0;
}

#endif /* NETLATD_STAMPS_CPU_BPF_H */
