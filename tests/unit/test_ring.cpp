// The ring buffer's consumer (RingView) on plain memory laid out as the
// kernel lays out a BPF ring: records in order, across the wrap, a record
// still being written, discarded ones, a stop asked for, and the consumer
// position stored as the producers need it.
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "netlatd/kernel/ring.hpp"

using netlatd::RingView;

namespace {

constexpr uint32_t kBusy = 1u << 31, kDiscard = 1u << 30;

// A ring of `size` bytes, its data mapped twice as the kernel maps it (here:
// copied into the second half after each write), with a producer that
// writes records as bpf_ringbuf_reserve/submit leave them.
struct FakeRing {
  explicit FakeRing(uint64_t bytes) : size(bytes), data(2 * bytes) {}

  // Returns the record's position.
  uint64_t put(const std::string &sample, uint32_t flags = 0) {
    const uint64_t at = producer;
    const uint32_t len = static_cast<uint32_t>(sample.size()) | flags;
    write(at, &len, 4);
    const uint32_t pg_off = 0;
    write(at + 4, &pg_off, 4);
    write(at + 8, sample.data(), sample.size());
    producer += (sample.size() + 8 + 7) & ~uint64_t{7};
    return at;
  }
  void set_flags(uint64_t at, uint32_t flags) {
    uint32_t len;
    std::memcpy(&len, &data[at % size], 4);
    len = (len & ~(kBusy | kDiscard)) | flags;
    write(at, &len, 4);
  }
  void write(uint64_t pos, const void *p, size_t n) {
    const auto *b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < n; i++) {
      const uint64_t off = (pos + i) % size;
      data[off] = b[i];
      data[off + size] = b[i];
    }
  }
  RingView view() { return RingView(&consumer, &producer, data.data(), size); }

  uint64_t size;
  std::vector<unsigned char> data;
  uint64_t consumer = 0, producer = 0;
};

std::vector<std::string> drain(FakeRing &r, size_t stop_after = SIZE_MAX) {
  std::vector<std::string> got;
  r.view().consume([&](const void *p, size_t n) {
    got.emplace_back(static_cast<const char *>(p), n);
    return got.size() < stop_after;
  });
  return got;
}

}  // namespace

TEST_CASE("ring: records in order, each of its own length, then none", "[unit][ring]") {
  FakeRing r(4096);
  r.put("a");
  r.put("twelve bytes");
  r.put(std::string(64, 'x'));
  CHECK(drain(r) == std::vector<std::string>{"a", "twelve bytes", std::string(64, 'x')});
  // Every record consumed: the producers get all the space back.
  CHECK(r.consumer == r.producer);
  CHECK(drain(r).empty());
}

TEST_CASE("ring: a record that wraps past the end reads whole", "[unit][ring]") {
  FakeRing r(256);
  // Fill and drain to near the end, so the next record straddles it.
  for (int i = 0; i < 3; i++)
    r.put(std::string(56, static_cast<char>('a' + i)));  // 64 bytes each with the header
  REQUIRE(drain(r).size() == 3);
  const std::string wrapping(100, 'w');  // starts at 192, ends at 300 - 256
  r.put(wrapping);
  r.put("after");
  CHECK(drain(r) == std::vector<std::string>{wrapping, "after"});
  CHECK(r.consumer == r.producer);
}

TEST_CASE("ring: a record still being written stops the drain there", "[unit][ring]") {
  FakeRing r(4096);
  r.put("first");
  const uint64_t busy = r.put("second", kBusy);
  r.put("third");
  CHECK(drain(r) == std::vector<std::string>{"first"});
  CHECK(r.consumer == busy);  // nothing past it is consumed
  r.set_flags(busy, 0);       // submitted
  CHECK(drain(r) == std::vector<std::string>{"second", "third"});
}

TEST_CASE("ring: discarded records are skipped, not handed over", "[unit][ring]") {
  FakeRing r(4096);
  r.put("kept");
  r.put("dropped", kDiscard);
  r.put("kept too");
  CHECK(drain(r) == std::vector<std::string>{"kept", "kept too"});
  CHECK(r.consumer == r.producer);
}

TEST_CASE("ring: a stop asked for consumes that record and no more", "[unit][ring]") {
  FakeRing r(4096);
  for (int i = 0; i < 5; i++)
    r.put(std::to_string(i));
  CHECK(drain(r, 2) == std::vector<std::string>{"0", "1"});
  CHECK(drain(r) == std::vector<std::string>{"2", "3", "4"});
}

TEST_CASE("ring: the consumer position is stored during a long drain, not only at its end", "[unit][ring]") {
  FakeRing r(1 << 16);
  const size_t n = 3 * RingView::kReleaseEvery + 5;
  for (size_t i = 0; i < n; i++)
    r.put("record");
  // The producers see space come back while the drain goes on: at the
  // record after each batch, the position stored is that batch's end.
  std::vector<uint64_t> seen;
  size_t count = 0;
  r.view().consume([&](const void *, size_t) {
    seen.push_back(r.consumer);
    count++;
    return true;
  });
  CHECK(count == n);
  CHECK(seen[0] == 0);
  CHECK(seen[RingView::kReleaseEvery] == RingView::kReleaseEvery * 16);
  CHECK(seen[2 * RingView::kReleaseEvery] == 2 * RingView::kReleaseEvery * 16);
  CHECK(r.consumer == r.producer);
}
