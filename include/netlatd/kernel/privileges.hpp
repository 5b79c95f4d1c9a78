#pragma once

namespace netlatd {

// Root, or CAP_BPF + CAP_PERFMON (5.8+); throws Error(NoPermission) otherwise.
void require_privileges();

}  // namespace netlatd
