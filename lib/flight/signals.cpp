// dump_on_signals(): SIGUSR1 and SIGTERM through a signal pipe
// (signal_pipe.hpp), whose thread dumps: a dump is not async-signal-safe.
// Also a std::terminate handler: an exception nobody catches (gloo's I/O
// threads throw gloo::EnforceNotMet when a message is longer than the recv
// posted for it) dumps before the abort.
//
// Once the process has begun to exit (exit(), main returned), nothing is
// dumped any more: the recorders and the locks a dump takes are being
// destroyed, and the work's own end was dumped already if it failed.
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>

#include "flight/recorder.hpp"
#include "flight/signal_pipe.hpp"

namespace distlab::flight {
namespace {

std::atomic<bool> exiting{false};
std::terminate_handler previous_terminate = nullptr;

void on_signal(int signal_number) {
  if (signal_number == SIGUSR1) {
    if (!exiting) dump_all("SIGUSR1");
    return;
  }
  if (!exiting) dump_all("SIGTERM (stopped from outside, e.g. by the launcher after another rank failed)");
  die_of(SIGTERM);
}

// "gloo::EnforceNotMet: [enforce fail at ...] ..." for the exception being
// thrown, if any.
std::string uncaught() {
  const std::exception_ptr current = std::current_exception();
  if (!current) return "no exception";
  try {
    std::rethrow_exception(current);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return what.substr(0, what.find('\n'));
  } catch (...) {
  }
  return "an exception that is not a std::exception";
}

void on_terminate() {
  static std::atomic<bool> once{false};
  if (!exiting && !once.exchange(true)) dump_all("terminate (" + uncaught() + ")");
  if (previous_terminate != nullptr) previous_terminate();  // prints what was thrown, then aborts
  std::abort();
}

}  // namespace

void dump_on_signals() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Registered after the recorders' statics exist (run_job makes its
    // recorder first), so it runs before they are destroyed.
    std::atexit([] { exiting = true; });
    previous_terminate = std::set_terminate(on_terminate);
    try {
      on_signals({SIGUSR1, SIGTERM}, on_signal);
    } catch (const std::exception&) {  // no pipe: no dumps on signals, nothing else changes
    }
  });
}

}  // namespace distlab::flight
