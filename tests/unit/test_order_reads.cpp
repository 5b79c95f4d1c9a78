// The queue-order join's rules (the checker: order/checker.hpp) with reads
// whose length is not their datagram's: a buffer shorter than the datagram
// (the read returns the buffer's length, the datagram is dequeued whole),
// MSG_TRUNC (the whole length whatever the buffer) and a buffer whose size
// read_bufsize cannot find (recvmmsg, readv: bufsize 0).
//
// Peeks (MSG_PEEK) are not modelled: a call that returned no data or peeked
// never reaches the rules (netlatd.bpf.c on_recv_return, `data`), and leaves
// the queue as it was, so to the rules it is no step at all.
#include "order/checker.hpp"

TEST_CASE("order rules: reads shorter than their datagram, their buffer's size known", "[order]") {
  // One reader: a full buffer makes every longer candidate fit, and there is
  // one candidate. Not every read is named: read.bpf.h asks read_bufsize
  // only with two slots or more, and a truncated read of the last one left
  // (bufsize 0) is ambiguous.
  Scenario one{"one reader, a 150-byte buffer", lengths({100, 200, 300, 150, 100}), 1, 2, false, true};
  one.buf = 150;
  run(one);
  // Several readers: a truncated read may be any longer datagram's; never a
  // shorter one's, and never named wrongly.
  Scenario many{"3 readers, 2 producers, a 150-byte buffer", lengths({100, 200, 300}, 2), 3, 1};
  many.buf = 150;
  run(many);
  Scenario eq{"2 readers, a buffer of the shortest one's length", lengths({100, 200, 100, 200}, 2), 2, 1};
  eq.buf = 100;
  run(eq);
}

TEST_CASE("order rules: MSG_TRUNC reads return the whole length, even past a short buffer", "[order]") {
  Scenario one{"one reader, MSG_TRUNC, a 50-byte buffer", lengths({100, 200, 100, 300}), 1, 2, false, true, true};
  one.buf = 50;
  one.msg_trunc = true;
  run(one);
  Scenario many{"3 readers, MSG_TRUNC, a 150-byte buffer", lengths({100, 200, 300}, 2), 3, 1};
  many.buf = 150;
  many.msg_trunc = true;
  run(many);
}

TEST_CASE("order rules: truncated reads whose buffer size is unknown are never named for a longer datagram",
          "[order]") {
  // bufsize 0: only a candidate of exactly the returned length is named; a
  // truncated read of one reader is then ambiguous (not every read named),
  // and a datagram of exactly the buffer's length can still be named.
  Scenario one{"one reader, an unknown 150-byte buffer", lengths({100, 200, 150, 300}), 1, 2, false, true};
  one.buf = 150;
  one.buf_unknown = true;
  run(one);
  Scenario many{"2 readers, an unknown 150-byte buffer", lengths({150, 200, 150, 100}, 2), 2, 1};
  many.buf = 150;
  many.buf_unknown = true;
  run(many);
}
