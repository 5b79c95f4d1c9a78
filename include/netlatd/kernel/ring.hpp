// The consumer side of the BPF ring buffer (BPF_MAP_TYPE_RINGBUF) that
// carries the records, read straight from its memory mapping.
//
// Why not libbpf's ring_buffer: it stores the consumer position after every
// record. That position shares a cache line the producers read at every
// reservation, so each store takes the line away from the CPUs receiving
// packets and each reservation takes it back: one cross-CPU transfer a
// record on each side. Here the position is stored once per batch (every
// kReleaseEvery records and at the end of each drain); the producers get
// their space back a batch later, a few KiB of a ring of MiBs. The record
// format (an 8-byte header: length with a busy and a discard bit, then the
// sample, padded to 8 bytes) is the kernel's ABI (include/uapi/linux/bpf.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "netlatd/base/fd.hpp"

namespace netlatd {

// The ring's memory, wherever it is mapped: the logic of a drain, apart
// from the mapping so that a unit test can drive it on plain memory.
class RingView {
public:
  // Records handed over before the consumer position is stored.
  static constexpr size_t kReleaseEvery = 64;

  // `data` is the ring of `size` bytes (a power of two) followed by its
  // second mapping (`size` bytes more): a record that wraps reads in one piece.
  RingView(uint64_t *consumer_pos, const uint64_t *producer_pos, const unsigned char *data, uint64_t size)
      : consumer_pos_(consumer_pos), producer_pos_(producer_pos), data_(data), mask_(size - 1) {}

  // Hands each committed record, in ring order, to fn(sample, length),
  // which returns false to stop after it (the record is consumed). Stops at
  // a record still being written. Discarded records are skipped, not handed
  // over. Returns the records handed over.
  template <class Fn>
  size_t consume(Fn &&fn);

private:
  static constexpr uint32_t kBusy = 1u << 31, kDiscard = 1u << 30, kHeader = 8;

  uint64_t *consumer_pos_;
  const uint64_t *producer_pos_;
  const unsigned char *data_;
  uint64_t mask_;
};

template <class Fn>
size_t RingView::consume(Fn &&fn) {
  uint64_t cons = __atomic_load_n(consumer_pos_, __ATOMIC_RELAXED);  // ours alone
  size_t handed = 0, since_release = 0;
  bool go_on = true;
  for (;;) {
    const uint64_t prod = __atomic_load_n(producer_pos_, __ATOMIC_ACQUIRE);
    if (cons >= prod || !go_on)
      break;
    while (cons < prod && go_on) {
      const unsigned char *hdr = data_ + (cons & mask_);
      const uint32_t len = __atomic_load_n(reinterpret_cast<const uint32_t *>(hdr), __ATOMIC_ACQUIRE);
      if (len & kBusy) {
        go_on = false;  // still being written: the next drain takes it
        break;
      }
      const uint32_t sample = len & ~(kBusy | kDiscard);
      cons += (uint64_t{sample} + kHeader + 7) & ~uint64_t{7};
      if (!(len & kDiscard)) {
        handed++;
        go_on = fn(static_cast<const void *>(hdr + kHeader), static_cast<size_t>(sample));
      }
      if (++since_release == kReleaseEvery) {
        __atomic_store_n(consumer_pos_, cons, __ATOMIC_RELEASE);
        since_release = 0;
      }
    }
  }
  __atomic_store_n(consumer_pos_, cons, __ATOMIC_RELEASE);
  return handed;
}

// A ring buffer map's mapping and an epoll descriptor that is readable when
// the kernel side wakes its consumer.
class RingBuffer {
public:
  // Maps the ring of `map_fd`, `size` bytes (its max_entries). Throws
  // netlatd::Error (ExitCode::Unavailable) when the kernel refuses.
  RingBuffer(int map_fd, uint64_t size);
  ~RingBuffer();
  RingBuffer(const RingBuffer &) = delete;
  RingBuffer &operator=(const RingBuffer &) = delete;

  int epoll_fd() const { return epoll_.get(); }
  // Waits up to timeout_ms (0: not at all) for a wake-up; true if one came.
  // Throws netlatd::Error on a failure other than EINTR.
  bool wait(int timeout_ms);
  RingView &view() { return *view_; }

private:
  void *consumer_ = nullptr, *producer_ = nullptr;
  size_t page_ = 0, producer_len_ = 0;
  Fd epoll_;
  std::unique_ptr<RingView> view_;
};

}  // namespace netlatd
