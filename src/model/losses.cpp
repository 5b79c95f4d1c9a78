#include "netlatd/model/losses.hpp"

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>


namespace netlatd {

const char *drop_name(int reason) {
  switch (reason) {
  case NETLATD_DROP_RINGBUF_FULL: return "ringbuf_full";
  case NETLATD_DROP_INFLIGHT_FULL: return "inflight_full";
  case NETLATD_DROP_SOCK_FIFO_FULL: return "sock_fifo_full";
  case NETLATD_DROP_SOCK_STATE_FAILED: return "sock_state_failed";
  case NETLATD_DROP_STACK_DROPPED: return "stack_dropped";
  case NETLATD_DROP_UNJOINED: return "unjoined_reused";
  case NETLATD_DROP_UNSEEN_READ: return "unseen_read";
  case NETLATD_DROP_TCP_SEGS_FULL: return "tcp_segs_full";
  case NETLATD_DROP_TCP_RANGE_UNKNOWN: return "tcp_range_unknown";
  case NETLATD_DROP_ORDER_LOST: return "order_lost";
  case NETLATD_DROP_TCP_GAP: return "tcp_gap";
  case NETLATD_DROP_TCP_COPIES: return "tcp_copies";
  case NETLATD_DROP_READER_FORGOTTEN: return "reader_forgotten";
  case NETLATD_DROP_ORDER_GIVEN_UP: return "order_given_up";
  case NETLATD_DROP_TCP_READ_TOO_MANY: return "tcp_read_too_many";
  }
  return "unknown";
}

const char *op_name(int op) {
  static const char *const names[] = {NETLATD_OP_NAMES};
  static_assert(std::size(names) == NETLATD_OP_COUNT, "a name for each of enum netlatd_op");
  return op >= 0 && op < NETLATD_OP_COUNT ? names[op] : "unknown";
}

void RunningCount::read(uint64_t reading) {
  // Below the last reading: the counter began again at 0 and all of it is
  // new. A difference taken regardless would wrap to some 1.8e19.
  total_ += reading >= last_ ? reading - last_ : reading;
  last_ = reading;
}

uint64_t RunningCount::take() {
  const uint64_t n = since_mark();
  mark_ = total_;
  return n;
}

void Losses::start(const KernelCounts &k) {
  // Everything from the programs' load, not from this reading: the maps are
  // new at load, so nothing in them came before. The daemon says READY before
  // it takes this reading, and traffic sent on READY is counted in between: a
  // read counted untracked there was in no interval line (1 of 250 in about
  // a third of the pipeline test's runs on a loaded host). The records of
  // that time wait in the ring and go to the first interval; so do their
  // counts, their operations (--count-ops) and the coverage's matching
  // packets.
  for (size_t i = 0; i < drops_.size(); i++) {
    drops_[i] = RunningCount();
    drops_[i].read(k.drops[i]);
  }
  for (size_t i = 0; i < counters_.size(); i++) {
    counters_[i] = RunningCount();
    counters_[i].read(k.counters[i]);
  }
  ops_.reset();
  if (k.ops) {
    ops_.emplace();
    for (size_t i = 0; i < ops_->size(); i++)
      (*ops_)[i].read((*k.ops)[i]);
  }
  matching_ = MatchingCount();
  matching_.read(matching_now());
}

uint64_t Losses::matching_now() const {
  return matching_packets({.matched = counter(NETLATD_CNT_MATCHED),
                           .inflight_full = drop(NETLATD_DROP_INFLIGHT_FULL),
                           .tcp_segs_full = drop(NETLATD_DROP_TCP_SEGS_FULL),
                           .stack_dropped = drop(NETLATD_DROP_STACK_DROPPED),
                           .cgroup_outside = counter(NETLATD_CNT_CGROUP_OUTSIDE)});
}

void Losses::read(const KernelCounts &k, uint64_t output_dropped, uint64_t outliers_rate_limited) {
  for (size_t i = 0; i < drops_.size(); i++)
    drops_[i].read(k.drops[i]);
  for (size_t i = 0; i < counters_.size(); i++)
    counters_[i].read(k.counters[i]);
  for (const auto &[hook, n] : k.hook_misses)
    hook_misses_[hook].read(n);
  if (ops_ && k.ops)
    for (size_t i = 0; i < ops_->size(); i++)
      (*ops_)[i].read((*k.ops)[i]);
  matching_.read(matching_now());
  output_dropped_.read(output_dropped);
  outliers_rate_limited_.read(outliers_rate_limited);
}

void Losses::add_expired(uint64_t unjoined, uint64_t unread) {
  unjoined_expired_.add(unjoined);
  unread_expired_.add(unread);
}

void Losses::end_interval(IntervalReport &r) {
  auto take = [this](int index) { return counters_[static_cast<size_t>(index)].take(); };
  for (size_t i = 0; i < drops_.size(); i++)
    r.drops[drop_name(static_cast<int>(i))] = drops_[i].take();
  r.drops["unjoined_expired"] = unjoined_expired_.take();
  r.drops["unread_expired"] = unread_expired_.take();
  r.drops["output_dropped"] = output_dropped_.take();
  r.drops["outliers_rate_limited"] = outliers_rate_limited_.take();
  r.matching = matching_.take();
  r.ambiguous_reads = take(NETLATD_CNT_AMBIGUOUS_READS);
  r.untracked_reads = take(NETLATD_CNT_UNTRACKED_READS);
  r.early_reads = take(NETLATD_CNT_EARLY_READS);
  r.queue_unseen = take(NETLATD_CNT_QUEUE_UNSEEN);
  r.sampled_out = take(NETLATD_CNT_SAMPLED_OUT);
  r.reader_stamps_far = take(NETLATD_CNT_READER_STAMP_FAR);
  r.tcp_bytes_read = take(NETLATD_CNT_TCP_BYTES_READ);
  r.tcp_bytes_skipped = take(NETLATD_CNT_TCP_BYTES_SKIPPED);
  const uint64_t outside = take(NETLATD_CNT_CGROUP_OUTSIDE);
  const uint64_t no_reader = take(NETLATD_CNT_CGROUP_NO_READER);
  if (cgroup_filter_) {
    r.cgroup_filtered["outside"] = outside;
    r.cgroup_filtered["no_reader"] = no_reader;
  }
  const uint64_t polls = take(NETLATD_CNT_NAPI_POLLS);
  const uint64_t packets = take(NETLATD_CNT_NAPI_PACKETS);
  const uint64_t budget_full = take(NETLATD_CNT_NAPI_BUDGET_FULL);
  if (napi_)
    r.napi = NapiStats{polls, packets, budget_full};
  for (auto &[hook, count] : hook_misses_)
    r.hook_misses[hook] = count.take();
  if (ops_)
    for (size_t i = 0; i < ops_->size(); i++)
      r.ops[op_name(static_cast<int>(i))] = (*ops_)[i].take();
  // Counted, not shown in the line: marked all the same, so that each
  // interval has its own share.
  for (int i : {NETLATD_CNT_MATCHED, NETLATD_CNT_QUEUED, NETLATD_CNT_EMITTED, NETLATD_CNT_IRQ})
    take(i);
}

void Losses::publish(MetricsSnapshot &m) const {
  auto total = [this](int index) { return counters_[static_cast<size_t>(index)].total(); };
  // The kernel's drops apart from netlatd's own losses: a packet the stack
  // dropped is the network's news, not a gap in the measurement.
  m.kernel_drops = drop(NETLATD_DROP_STACK_DROPPED);
  for (int i = 0; i < NETLATD_DROP_COUNT; i++)
    if (i != NETLATD_DROP_STACK_DROPPED)
      m.losses[drop_name(i)] = drop(i);
  m.losses["unjoined_expired"] = unjoined_expired_.total();
  m.losses["unread_expired"] = unread_expired_.total();
  m.losses["output_dropped"] = output_dropped_.total();
  m.losses["outliers_rate_limited"] = outliers_rate_limited_.total();
  m.reads_unnamed["ambiguous"] = total(NETLATD_CNT_AMBIGUOUS_READS);
  m.reads_unnamed["untracked"] = total(NETLATD_CNT_UNTRACKED_READS);
  m.reads_unnamed["early"] = total(NETLATD_CNT_EARLY_READS);
  m.queue_unseen = total(NETLATD_CNT_QUEUE_UNSEEN);
  m.sampled_out = total(NETLATD_CNT_SAMPLED_OUT);
  m.reader_stamps_far = total(NETLATD_CNT_READER_STAMP_FAR);
  if (cgroup_filter_) {
    m.cgroup_filtered["outside"] = total(NETLATD_CNT_CGROUP_OUTSIDE);
    m.cgroup_filtered["no_reader"] = total(NETLATD_CNT_CGROUP_NO_READER);
  }
  if (napi_) {
    m.napi["polls"] = total(NETLATD_CNT_NAPI_POLLS);
    m.napi["packets"] = total(NETLATD_CNT_NAPI_PACKETS);
    m.napi["budget_exhausted"] = total(NETLATD_CNT_NAPI_BUDGET_FULL);
  }
  m.matching = matching_.total();
  m.tcp_bytes["read"] = total(NETLATD_CNT_TCP_BYTES_READ);
  m.tcp_bytes["skipped"] = total(NETLATD_CNT_TCP_BYTES_SKIPPED);
  m.hook_misses.clear();
  for (const auto &[hook, count] : hook_misses_)
    m.hook_misses[hook] = count.total();
}

uint64_t Losses::total_lost() const {
  uint64_t lost = unjoined_expired_.total() + unread_expired_.total();
  for (const RunningCount &d : drops_)
    lost += d.total();
  return lost;
}

std::string Losses::summary() const {
  std::vector<std::string> named;
  for (size_t i = 0; i < drops_.size(); i++)
    if (drops_[i].total())
      named.push_back(fmt::format("{} {}", drop_name(static_cast<int>(i)), drops_[i].total()));
  return named.empty() ? std::string("none") : fmt::format("{}", fmt::join(named, ", "));
}

}  // namespace netlatd
