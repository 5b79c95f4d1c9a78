#pragma once
// --aggregate: reads what the kernel side added to its per-CPU histograms.
// Each series has two sides per CPU; writers take the side of the current
// epoch, so the daemon flips the epoch, waits for the writers of the old
// side to finish, then reads and zeroes it.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "bpf_owned.hpp"
#include "loader.hpp"
#include "netlatd/model/breakdown.hpp"

namespace netlatd {

class AggregateReader {
public:
  AggregateReader(netlatd_bpf &skel, int ncpus, AggregateLayout layout)
      : skel_(skel), ncpus_(static_cast<size_t>(ncpus)), layout_(std::move(layout)) {}

  bool on() const { return layout_.nseries != 0; }
  // See Tracer::drain_aggregate.
  bool drain(std::vector<KernelSeries> &out, int wait_ms);
  // See Tracer::set_aggregate_outliers.
  void set_outliers(std::optional<uint64_t> over_ns);
  uint64_t bytes() const;  // both sides, every CPU

private:
  // Flips the epoch; true once every writer of the old side is done
  // (within wait_ms), with `side` the old one.
  bool switch_side(uint32_t &side, int wait_ms);
  void read_side(uint32_t side, std::vector<KernelSeries> &out);
  SeriesKey key_of(uint32_t series) const;

  netlatd_bpf &skel_;
  size_t ncpus_;
  AggregateLayout layout_;
  // One block read at a time (55 KiB), and the zeros it is reset with.
  std::unique_ptr<netlatd_agg_block> block_, blank_;
};

}  // namespace netlatd
