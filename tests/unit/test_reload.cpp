// What a SIGHUP may change while the programs stay loaded, and what it keeps.
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/service/reload.hpp"

using netlatd::Options;

namespace {

Options running() {
  Options o;
  o.ifaces = {"eth0"};
  o.ports = {5000, 5001};
  o.by.dport = true;
  o.by.proto = true;
  o.cgroups = {"/system.slice"};
  o.ringbuf_mb = 2;
  o.interval_s = 10;
  return o;
}

}  // namespace

TEST_CASE("reload: what can change at once passes through untouched", "[reload]") {
  const Options now = running();
  Options next = now;
  next.ifaces = {"eth1", "eth2"};
  next.interval_s = 2;
  next.output = "/var/log/netlatd/other.jsonl";
  next.metrics_resolution = 8;
  CHECK(netlatd::keep_start_only(now, next).empty());
  CHECK(next.ifaces == std::vector<std::string>{"eth1", "eth2"});
  CHECK(next.interval_s == 2);
  CHECK(next.output == "/var/log/netlatd/other.jsonl");
  CHECK(next.metrics_resolution == 8);
}

TEST_CASE("reload: what is built into the loaded programs keeps its running value, one line each", "[reload]") {
  const Options now = running();
  Options next = now;
  next.ports = {6000};
  next.by.family = true;
  next.cgroups = {"/kubepods.slice"};
  next.ringbuf_mb = 8;
  next.netns = "blue";
  next.aggregate = true;
  next.sample = 16;
  next.interval_s = 1;  // alongside: still applied
  const auto kept = netlatd::keep_start_only(now, next);
  REQUIRE(kept.size() == 7);
  CHECK(kept[0] == "ports [6000] differ from the running [5000,5001]; restart netlatd to apply them, still tracing "
                   "[5000,5001]");
  CHECK(kept[1] == "by [dport,proto,family] differs from the running [dport,proto]; restart netlatd to apply it");
  CHECK(kept[2] == "cgroups [/kubepods.slice] differ from the running [/system.slice]; restart netlatd to apply them");
  CHECK(kept[3] == "ringbuf_mb 8 differs from the running 2; restart netlatd to apply it");
  CHECK(kept[4] == "sample 16 differs from the running 1; restart netlatd to apply it");
  CHECK(kept[5] == "aggregate on differs from the running off; restart netlatd to apply it");
  CHECK(kept[6] == "netns 'blue' differs from the running ''; restart netlatd to apply it");
  CHECK(next.sample == now.sample);
  CHECK_FALSE(next.aggregate);
  CHECK(next.ports == now.ports);
  CHECK(next.by == now.by);
  CHECK(next.cgroups == now.cgroups);
  CHECK(next.ringbuf_mb == now.ringbuf_mb);
  CHECK(next.netns.empty());
  CHECK(next.interval_s == 1);
}
