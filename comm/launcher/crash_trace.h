// File: comm/launcher/crash_trace.h
//
// A rank that dies of a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
// SIGABRT) prints where, before it dies: the signal, the faulting address
// and a symbolized stack trace on stderr, which the launcher forwards with
// the rank's prefix. Without it a crash on another machine leaves only the
// launcher's "rank 0 was killed by signal 11", and nothing to go on.
//
// Abseil's failure signal handler does the work; afterwards it restores the
// default action and raises the signal again, so the process still dies of
// it (the launcher's report and exit code are unchanged). SIGTERM is left
// alone: it is the training programs' request to save and stop.
//
// Under AddressSanitizer / ThreadSanitizer this does nothing: their own
// reports of a fatal signal are better.
//
//   int main(int argc, char** argv) {
//     comm::InstallCrashTrace(argv[0]);
//     ...
#ifndef COMM_LAUNCHER_CRASH_TRACE_H_
#define COMM_LAUNCHER_CRASH_TRACE_H_

namespace comm {

// Call once, early in main. `argv0` is the program's path (for the
// symbolizer).
void InstallCrashTrace(const char* argv0);

}  // namespace comm

#endif  // COMM_LAUNCHER_CRASH_TRACE_H_
