#pragma once
// The soak's traffic, a round at a time: a UDP flood, UDP socket churn and
// a TCP connection per request at once, and the traced interface deleted
// under the flood and re-created. What each round's applications sent and
// read goes to Soak, which holds the round's records against it.
#include <cstdint>

#include "net_fixture.hpp"
#include "process.hpp"
#include "soak_output.hpp"

namespace nltest::soak_tier {

// The rounds' figures, summed.
struct Traffic {
  uint64_t flood_sent = 0, flood_refused = 0, flood_read = 0;
  uint64_t churn_sent = 0, churn_read = 0, churn_sockets = 0;
  uint64_t tcp_requests = 0, tcp_reads = 0;
  uint64_t unlogged = 0;
  int rounds = 0, recreations = 0, deleted_under_flood = 0, app_failures = 0;
};

// One round, summed into `tr`; fails the test when the flood's senders
// failed or the daemon is gone.
void run_round(Soak &soak, const VethNamespaces &net, Process &daemon, Traffic &tr);

}  // namespace nltest::soak_tier
