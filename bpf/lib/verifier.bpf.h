/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* netlatd kernel side: the verifier's limits, worked around in one place.
 * Each helper says which limit it answers. Call sites say why they need it. */
#ifndef NETLATD_LIB_VERIFIER_BPF_H
#define NETLATD_LIB_VERIFIER_BPF_H

#ifdef __bpf__
/* The low 32 bits of a kernel pointer as a plain number. The verifier keeps
 * a pointer's type through C casts and refuses shifts or multiplies on it;
 * a 32-bit move is how it lets a program loaded with CAP_PERFMON turn one
 * into a number. (A whole pointer: ptr_value_on below.) */
static __always_inline __u32 ptr_low32(__u64 p)
{
	__u32 lo = (__u32)p;
	asm volatile("%[lo] = %[lo]" : [lo] "+w"(lo));
	return lo;
}

/* Comparisons as arithmetic (1 or 0): BPF has no set-on-condition, and a
 * branch per slot would fork the verifier's walk of the lock region at every
 * slot of every loop. In asm, or clang turns them back into branches. */
static __always_inline __u64 ne_bit(__u64 a, __u64 b)
{
	__u64 d = a ^ b, n;
	asm volatile("%[n] = %[d]\n\t"
		     "%[n] = -%[n]\n\t"
		     "%[n] |= %[d]\n\t"
		     "%[n] >>= 63"
		     : [n] "=&r"(n)
		     : [d] "r"(d));
	return n;
}
/* a > b, for values below 2^63 */
static __always_inline __u64 gt_bit(__u64 a, __u64 b)
{
	__u64 n;
	asm volatile("%[n] = %[b]\n\t"
		     "%[n] -= %[a]\n\t"
		     "%[n] >>= 63"
		     : [n] "=&r"(n)
		     : [a] "r"(a), [b] "r"(b));
	return n;
}

#else
/* The host (the unit tier's checker of udp/order/'s plain-C rules): the same
 * values, in plain C. */
static inline __u64 ne_bit(__u64 a, __u64 b) { return a != b; }
static inline __u64 gt_bit(__u64 a, __u64 b) { return a > b; }
#endif
static __always_inline __u64 eq_bit(__u64 a, __u64 b) { return ne_bit(a, b) ^ 1; }

#ifdef __bpf__
/* A whole kernel pointer as a plain number, for arithmetic. The verifier lets
 * a program loaded with CAP_PERFMON store a pointer into a map value, and what
 * it loads back from there is a number: a store and a load on this CPU's
 * state (where a read through bpf_probe_read_kernel is a helper call, ~20-30
 * ns a time on a VM). The caller passes the state it looked up once for the
 * program: a lookup per use was most of a packet's map lookups (issue 32). */
static __always_inline __u64 ptr_value_on(struct cpu_state *cs, const void *p, enum scratch_user who)
{
	*(const void *volatile *)&cs->scratch[who] = p;
	return *(volatile __u64 *)&cs->scratch[who];
}

/* `v` as a number the verifier knows nothing of (what it loads from a map
 * value): where a value known on one path and unknown on another would fork
 * its walk of everything after. No helper call, so it may run under a
 * socket's lock. */
static __always_inline __u64 opaque_on(struct cpu_state *cs, __u64 v, enum scratch_user who)
{
	*(volatile __u64 *)&cs->scratch[who] = v;
	return *(volatile __u64 *)&cs->scratch[who];
}

#else
/* The host has no verifier to hide a value from. */
#define opaque_on(cs, v, who) ((void)(cs), (__u64)(v))
#endif

#endif /* NETLATD_LIB_VERIFIER_BPF_H */
