// ThreadSanitizer suppressions for tests that run Gloo (linked into the test binary, where
// the tsan runtime looks for __tsan_default_suppressions; other builds never call it).
//
// Debian's libgloo is not built with tsan, so tsan does not see the synchronisation inside
// it. One report follows from that: an UnboundBuffer destroyed after an operation failed
// (a dead peer, a timeout) "races" with Gloo's I/O thread telling it of the failure
// (UnboundBuffer::signalException locking and signalling the buffer's mutex and condition
// against the buffer's destructor and its delete). Gloo's destructor waits until the I/O
// thread has let go of the buffer (ShareableNonOwningPtr, gloo/common/memory.h), through
// a shared_ptr count that tsan cannot see in the uninstrumented library. The suppressions
// name those two functions only (a report is suppressed when either access's stack holds
// one), so races on our own buffers are still reported.

extern "C" const char* __tsan_default_suppressions() {
  return "race:gloo::transport::tcp::UnboundBuffer::signalException\n"
         "race:gloo::transport::tcp::UnboundBuffer::~UnboundBuffer\n";
}
