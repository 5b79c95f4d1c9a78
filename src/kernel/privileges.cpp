// Whether this process may load and attach netlatd's programs.
#include "netlatd/kernel/privileges.hpp"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "netlatd/base/errors.hpp"

namespace netlatd {

void require_privileges() {
  // The effective set, not the uid: root in a container or under a unit's
  // CapabilityBoundingSet may lack them, and a user with them is enough.
#ifndef CAP_BPF
#define CAP_BPF 39
#endif
#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  std::string lacking = "its capabilities cannot be read";
  if (syscall(SYS_capget, &hdr, data) == 0) {
    auto has = [&](int cap) { return (data[cap / 32].effective >> (cap % 32)) & 1u; };
    if ((has(CAP_BPF) && has(CAP_PERFMON)) || has(CAP_SYS_ADMIN))
      return;
    lacking = std::string("it lacks ") + (has(CAP_BPF) ? "" : "CAP_BPF") +
              (!has(CAP_BPF) && !has(CAP_PERFMON) ? " and " : "") + (has(CAP_PERFMON) ? "" : "CAP_PERFMON");
  }
  throw Error(ExitCode::NoPermission,
              "must run as root or with CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before 5.8): " + lacking);
}

}  // namespace netlatd
