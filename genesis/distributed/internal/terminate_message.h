// Says why the process ends when an exception escapes a thread.
//
// Gloo reports failures by throwing, also on threads of its own; an exception that no
// one catches ends the process through std::terminate. The handler installed here first
// writes the exception's type and message to standard error, so a rank never dies of
// SIGABRT without a word, then hands over to the handler it replaced.
#ifndef GENESIS_DISTRIBUTED_INTERNAL_TERMINATE_MESSAGE_H_
#define GENESIS_DISTRIBUTED_INTERNAL_TERMINATE_MESSAGE_H_

namespace genesis::distributed::internal {

// Installs the handler (once per process; later calls do nothing).
void SayWhyWhenTerminating();

}  // namespace genesis::distributed::internal

#endif  // GENESIS_DISTRIBUTED_INTERNAL_TERMINATE_MESSAGE_H_
