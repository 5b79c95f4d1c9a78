#pragma once
// Owners of the kernel objects libbpf hands out: the skeleton (the BPF
// object, its maps and programs) and each program's link. Destroying a
// link detaches its program; destroying the skeleton closes the maps.
#include <memory>

#include <linux/types.h>
#include <bpf/libbpf.h>

#include "netlatd/abi.h"  // the skeleton's types
#include "netlatd.skel.h"

namespace netlatd {

struct SkeletonDestroy {
  void operator()(netlatd_bpf *skel) const { netlatd_bpf__destroy(skel); }
};
using Skeleton = std::unique_ptr<netlatd_bpf, SkeletonDestroy>;

struct LinkDestroy {
  void operator()(bpf_link *link) const { bpf_link__destroy(link); }
};
using Link = std::unique_ptr<bpf_link, LinkDestroy>;

}  // namespace netlatd
