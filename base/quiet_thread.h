// `quiet_thread`: starts a thread of tdbg's own (the run database's writer, the close's bounded
// runner, hashing helpers) with every signal blocked. A signal sent to a recorded process (a
// launcher's SIGTERM, Ctrl-C) then goes to one of the program's threads, as without tdbg; on
// tdbg's writer, a handler that ends the process (torch's DataLoader worker handler calls
// _exit) would wait for a close that needs that very thread.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace tdbg {

template <typename F>
std::thread quiet_thread(F&& body) {
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &before);  // inherited by the new thread from its start
  struct Restore {
    sigset_t mask;
    ~Restore() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{before};
  return std::thread(std::forward<F>(body));
}

}  // namespace tdbg
