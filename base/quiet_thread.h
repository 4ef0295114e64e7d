// `quiet_thread`: starts a thread of tdbg's own (the run database's writer, the close's bounded
// runner, hashing helpers) with every signal blocked; `SignalsBlocked` does the blocking for a
// thread started otherwise (the preload's signal watcher, a detached pthread). A signal sent
// to a recorded process (a launcher's SIGTERM, Ctrl-C) then goes to one of the program's
// threads, as without tdbg; on tdbg's writer, a handler that ends the process (torch's
// DataLoader worker handler calls _exit) would wait for a close that needs that very thread.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace tdbg {

// Blocks every signal on the calling thread for its lifetime: a thread created meanwhile
// starts with them blocked (it inherits the mask). The mask before is put back at the end.
class SignalsBlocked {
 public:
  SignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &before_);
  }
  ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &before_, nullptr); }
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t before_;
};

template <typename F>
std::thread quiet_thread(F&& body) {
  SignalsBlocked blocked;
  return std::thread(std::forward<F>(body));
}

}  // namespace tdbg
